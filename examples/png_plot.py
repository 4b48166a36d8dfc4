"""A line plot written as a PNG with the standard library only (zlib +
struct), so `make demo` needs no plotting package: axes with tick labels,
one polyline per series, a legend.  Text uses a built-in 5x7 pixel font."""
import struct
import zlib

# 5x7 glyphs: 7 rows of 5 columns, '#' on.
_ROWS = {
    "0": [".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."],
    "1": ["..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."],
    "2": [".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"],
    "3": ["#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."],
    "4": ["...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."],
    "5": ["#####", "#....", "####.", "....#", "....#", "#...#", ".###."],
    "6": ["..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."],
    "7": ["#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."],
    "8": [".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."],
    "9": [".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."],
    ".": [".....", ".....", ".....", ".....", ".....", ".##..", ".##.."],
    "-": [".....", ".....", ".....", ".###.", ".....", ".....", "....."],
    ":": [".....", ".##..", ".##..", ".....", ".##..", ".##..", "....."],
    "_": [".....", ".....", ".....", ".....", ".....", ".....", "#####"],
    ",": [".....", ".....", ".....", ".....", ".##..", "..#..", ".#..."],
    "/": [".....", "....#", "...#.", "..#..", ".#...", "#....", "....."],
    "a": [".....", ".....", ".###.", "....#", ".####", "#...#", ".####"],
    "c": [".....", ".....", ".###.", "#....", "#....", "#...#", ".###."],
    "d": ["....#", "....#", ".##.#", "#..##", "#...#", "#...#", ".####"],
    "e": [".....", ".....", ".###.", "#...#", "#####", "#....", ".###."],
    "g": [".....", ".####", "#...#", "#...#", ".####", "....#", ".###."],
    "i": ["..#..", ".....", ".##..", "..#..", "..#..", "..#..", ".###."],
    "l": [".##..", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."],
    "n": [".....", ".....", "#.##.", "##..#", "#...#", "#...#", "#...#"],
    "o": [".....", ".....", ".###.", "#...#", "#...#", "#...#", ".###."],
    "p": [".....", ".....", "####.", "#...#", "####.", "#....", "#...."],
    "r": [".....", ".....", "#.##.", "##..#", "#....", "#....", "#...."],
    "s": [".....", ".....", ".####", "#....", ".###.", "....#", "####."],
    "t": [".#...", ".#...", "###..", ".#...", ".#...", ".#..#", "..##."],
    "u": [".....", ".....", "#...#", "#...#", "#...#", "#..##", ".##.#"],
    "v": [".....", ".....", "#...#", "#...#", "#...#", ".#.#.", "..#.."],
    "y": [".....", ".....", "#...#", "#...#", ".####", "....#", ".###."],
}


def _glyph(ch):
    return _ROWS.get(ch, ["....."] * 7)


class Canvas:
    def __init__(self, width, height, background=(255, 255, 255)):
        self.w, self.h = width, height
        self.px = bytearray(bytes(background) * (width * height))

    def set(self, x, y, color):
        if 0 <= x < self.w and 0 <= y < self.h:
            i = 3 * (y * self.w + x)
            self.px[i:i + 3] = bytes(color)

    def rect(self, x0, y0, x1, y1, color):
        for y in range(max(0, y0), min(self.h, y1 + 1)):
            for x in range(max(0, x0), min(self.w, x1 + 1)):
                self.set(x, y, color)

    def line(self, x0, y0, x1, y1, color, width=1):
        """Bresenham with a square pen of `width` pixels."""
        x0, y0, x1, y1 = int(round(x0)), int(round(y0)), int(round(x1)), int(round(y1))
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err, r = dx + dy, width // 2
        while True:
            self.rect(x0 - r, y0 - r, x0 - r + width - 1, y0 - r + width - 1, color)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(self, x, y, s, color=(0, 0, 0), scale=2):
        for k, ch in enumerate(s):
            for r, row in enumerate(_glyph(ch)):
                for c, bit in enumerate(row):
                    if bit == "#":
                        ox, oy = x + (6 * k + c) * scale, y + r * scale
                        self.rect(ox, oy, ox + scale - 1, oy + scale - 1, color)

    def png(self):
        raw = b"".join(b"\x00" + bytes(self.px[3 * y * self.w:3 * (y + 1) * self.w]) for y in range(self.h))

        def chunk(tag, data):
            return (struct.pack(">I", len(data)) + tag + data
                    + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

        header = struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)  # 8-bit RGB
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9))
                + chunk(b"IEND", b""))


def _ticks(lo, hi, n=5):
    span = (hi - lo) or 1.0
    raw = span / n
    mag = 10 ** __import__("math").floor(__import__("math").log10(raw))
    step = min((m * mag for m in (1, 2, 5, 10) if m * mag >= raw), default=raw)
    first = (lo // step) * step
    out, v = [], first
    while v <= hi + 1e-12:
        if v >= lo - 1e-12:
            out.append(v)
        v += step
    return out


def line_plot(path, series, title="", xlabel="step", ylabel="loss", width=800, height=480):
    """Writes a PNG at `path`: series is [(label, ys, (r, g, b), pen width)],
    each ys a list of values at x = 0, 1, ...; drawn in order (the last on
    top)."""
    c = Canvas(width, height)
    left, right, top, bottom = 80, width - 20, 40, height - 60
    n = max(len(ys) for _, ys, _, _ in series)
    ymin = min(min(ys) for _, ys, _, _ in series)
    ymax = max(max(ys) for _, ys, _, _ in series)
    pad = 0.05 * ((ymax - ymin) or 1.0)
    ymin, ymax = ymin - pad, ymax + pad
    xmax = max(1, n - 1)

    def X(i):
        return left + (right - left) * i / xmax

    def Y(v):
        return bottom - (bottom - top) * (v - ymin) / (ymax - ymin)

    grey, black = (225, 225, 225), (0, 0, 0)
    for v in _ticks(ymin, ymax, 8):
        c.line(left, Y(v), right, Y(v), grey)
        label = f"{v:.2f}"
        c.text(left - 8 - 12 * len(label), int(Y(v)) - 7, label)
    for v in _ticks(0, xmax):
        c.line(X(v), top, X(v), bottom, grey)
        label = f"{int(v)}"
        c.text(int(X(v)) - 6 * len(label), bottom + 8, label)
    c.line(left, top, left, bottom, black)
    c.line(left, bottom, right, bottom, black)
    c.text((left + right) // 2 - 6 * len(xlabel), height - 26, xlabel)
    c.text(8, top - 30, ylabel)
    c.text(left + 10, 8, title)
    for label, ys, color, pen in series:
        for i in range(1, len(ys)):
            c.line(X(i - 1), Y(ys[i - 1]), X(i), Y(ys[i]), color, pen)
    for k, (label, _, color, pen) in enumerate(series):
        y = top + 12 + 22 * k
        c.rect(right - 190, y + 4, right - 160, y + 7, color)
        c.text(right - 150, y, label)
    with open(path, "wb") as f:
        f.write(c.png())
