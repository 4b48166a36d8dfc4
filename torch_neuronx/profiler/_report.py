"""The HTML report of a torch.profiler chrome trace.

Decisions:
- Input is the chrome trace torch.profiler writes (``export_chrome_trace``,
  ``tensorboard_trace_handler``), not a live profiler object: the report can
  be made later, elsewhere, from a file someone sent.
- Python does the parsing and the aggregation (lanes, nesting depth, top ops,
  memory series); the page only draws.  The data is embedded as one JSON
  block; drawing is a small hand-written canvas renderer, so the file has no
  external script, font or stylesheet and opens offline.
- Lanes: one per CPU thread (ops nested by depth) and one per device stream
  (``kernel`` and ``gpu_memcpy`` events on pid = device, tid = stream).
- A device task is charged to the CPU op it was launched from (its
  ``correlation``, which is the op's ``External id``); tasks without a link
  are charged to their own name.  Fallbacks are the
  ``neuron::fallback aten::op`` ranges fallback.cpp records, with the copies
  correlated to them.
- Memory over time: the ``[memory]`` instant events of profile_memory=True
  for non-CPU devices (Total Allocated / Total Reserved after each event).
"""
from __future__ import annotations

import gzip
import html
import json
import os
from collections import defaultdict
from typing import Any

FALLBACK_PREFIX = "neuron::fallback "
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
# ph "X" categories that are not ops on a CPU thread lane.
SKIP_CATS = {"Trace", "trace"}

FLAG_FALLBACK = 1
FLAG_COPY = 2
FLAG_IN_FALLBACK = 4


def load_trace(path: str) -> dict[str, Any]:
    """The trace JSON (``.json`` or ``.json.gz``) as a dict with traceEvents."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    if isinstance(data, list):
        data = {"traceEvents": data}
    if "traceEvents" not in data:
        raise ValueError(f"{path}: not a chrome trace (no traceEvents)")
    return data


def _lane_names(events: list[dict]) -> tuple[dict, dict]:
    procs, threads = {}, {}
    for e in events:
        if e.get("ph") != "M":
            continue
        name = (e.get("args") or {}).get("name")
        if e.get("name") == "process_name" and name is not None:
            procs[e.get("pid")] = str(name)
        elif e.get("name") == "thread_name" and name is not None:
            threads[(e.get("pid"), e.get("tid"))] = str(name)
    return procs, threads


def _as_int(v: Any, default: int = 0) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def summarize(trace: dict[str, Any]) -> dict[str, Any]:
    """What the page draws: lanes, events (flat arrays), top ops, fallbacks,
    memory series and counts."""
    events = trace["traceEvents"]
    procs, threads = _lane_names(events)
    spans = [e for e in events if e.get("ph") == "X" and e.get("cat") not in SKIP_CATS
             and "ts" in e]
    device_events = [e for e in spans if e.get("cat") in DEVICE_CATS]
    cpu_events = [e for e in spans if e.get("cat") not in DEVICE_CATS]
    mem_events = [e for e in events if e.get("ph") == "i" and e.get("name") == "[memory]"
                  and _as_int((e.get("args") or {}).get("Device Type"), 0) != 0]
    times = [float(e["ts"]) for e in spans] + [float(e["ts"]) for e in mem_events if "ts" in e]
    ends = [float(e["ts"]) + float(e.get("dur", 0)) for e in spans]
    t0 = min(times) if times else 0.0
    t1 = max(ends + times) if times else 1.0

    # Lanes: CPU threads first (in order of appearance), then device streams.
    lane_index: dict[tuple, int] = {}
    lanes: list[dict] = []

    def lane_of(e: dict, kind: str) -> int:
        key = (kind, e.get("pid"), e.get("tid"))
        if key not in lane_index:
            lane_index[key] = len(lanes)
            if kind == "device":
                args = e.get("args") or {}
                dev = args.get("device", e.get("pid"))
                stream = args.get("stream", e.get("tid"))
                name = threads.get((e.get("pid"), e.get("tid"))) or f"stream {stream}"
                name = f"neuron:{dev} {name}" if "neuron" not in name else name
            else:
                name = threads.get((e.get("pid"), e.get("tid"))) or f"thread {e.get('tid')}"
                pname = procs.get(e.get("pid"))
                name = f"CPU {name}" if not pname else f"CPU {name}"
            lanes.append({"name": name, "kind": kind, "depth": 1})
        return lane_index[key]

    # Fallback ranges; the ops nested in them (the fallback's own copies are
    # launched by the aten::_to_copy / copy_ ops it runs) are found below.
    fallback_ids: dict[int, str] = {}  # External id of an op in a fallback -> the fallback
    fallback_counts: dict[str, int] = defaultdict(int)
    cpu_by_corr: dict[int, dict] = {}
    for e in cpu_events:
        args = e.get("args") or {}
        ext = _as_int(args.get("External id"), 0)
        if ext:
            cpu_by_corr.setdefault(ext, e)
        if str(e.get("name", "")).startswith(FALLBACK_PREFIX):
            fallback_counts[e["name"][len(FALLBACK_PREFIX):]] += 1

    names: list[str] = []
    name_index: dict[str, int] = {}

    def name_id(n: str) -> int:
        if n not in name_index:
            name_index[n] = len(names)
            names.append(n)
        return name_index[n]

    ev_lane, ev_start, ev_dur, ev_name, ev_depth, ev_flags, ev_link = [], [], [], [], [], [], []

    # CPU events: depth by nesting within each lane.
    by_lane: dict[int, list[dict]] = defaultdict(list)
    for e in cpu_events:
        by_lane[lane_of(e, "cpu")].append(e)
    for e in device_events:
        lane_of(e, "device")
    for lane, evs in by_lane.items():
        evs.sort(key=lambda e: (float(e["ts"]), -float(e.get("dur", 0))))
        stack: list[tuple[float, str | None]] = []  # (end, the fallback it is in)
        for e in evs:
            s, d = float(e["ts"]), float(e.get("dur", 0))
            while stack and stack[-1][0] <= s:
                stack.pop()
            depth = len(stack)
            name = str(e.get("name", ""))
            flags = FLAG_FALLBACK if name.startswith(FALLBACK_PREFIX) else 0
            within = name if flags else (stack[-1][1] if stack else None)
            stack.append((s + d, within))
            if within is not None:
                ext = _as_int((e.get("args") or {}).get("External id"), 0)
                if ext:
                    fallback_ids[ext] = within
                if not flags:
                    flags = FLAG_IN_FALLBACK
            ev_lane.append(lane)
            ev_start.append(round(s - t0, 3))
            ev_dur.append(round(d, 3))
            ev_name.append(name_id(name))
            ev_depth.append(depth)
            ev_flags.append(flags)
            ev_link.append(_as_int((e.get("args") or {}).get("External id"), 0))
            lanes[lane]["depth"] = max(lanes[lane]["depth"], depth + 1)

    # Device events, and the top ops by device time.
    top: dict[str, dict] = {}
    for e in device_events:
        args = e.get("args") or {}
        corr = _as_int(args.get("correlation", args.get("External id")), 0)
        s, d = float(e["ts"]), float(e.get("dur", 0))
        name = str(e.get("name", ""))
        flags = FLAG_COPY if e.get("cat") == "gpu_memcpy" or name.startswith("memcpy") else 0
        if corr in fallback_ids:
            flags |= FLAG_IN_FALLBACK
        ev_lane.append(lane_of(e, "device"))
        ev_start.append(round(s - t0, 3))
        ev_dur.append(round(d, 3))
        ev_name.append(name_id(name))
        ev_depth.append(0)
        ev_flags.append(flags)
        ev_link.append(corr)
        op = cpu_by_corr.get(corr)
        key = str(op.get("name")) if op is not None else name
        if corr in fallback_ids:  # charged to the fallback, not to its inner copy ops
            key = fallback_ids[corr]
        row = top.setdefault(key, {"name": key, "tasks": 0, "device_us": 0.0, "copies_us": 0.0,
                                   "fallback": False})
        row["tasks"] += 1
        row["device_us"] += d
        if flags & FLAG_COPY:
            row["copies_us"] += d
        if flags & FLAG_IN_FALLBACK:
            row["fallback"] = True
    top_rows = sorted(top.values(), key=lambda r: -r["device_us"])
    for r in top_rows:
        r["device_us"] = round(r["device_us"], 3)
        r["copies_us"] = round(r["copies_us"], 3)

    # Device memory over time, per device.
    mem: dict[int, dict[str, list]] = {}
    for e in sorted(mem_events, key=lambda e: float(e.get("ts", 0))):
        args = e.get("args") or {}
        dev = _as_int(args.get("Device Id"), 0)
        m = mem.setdefault(dev, {"device": dev, "t": [], "allocated": [], "reserved": []})
        m["t"].append(round(float(e["ts"]) - t0, 3))
        m["allocated"].append(_as_int(args.get("Total Allocated"), 0))
        m["reserved"].append(_as_int(args.get("Total Reserved"), 0))

    device_lanes = sum(1 for lane in lanes if lane["kind"] == "device")
    device_total = sum(float(e.get("dur", 0)) for e in device_events)
    return {
        "lanes": lanes,
        "names": names,
        "ev": {"lane": ev_lane, "start": ev_start, "dur": ev_dur, "name": ev_name,
               "depth": ev_depth, "flags": ev_flags, "link": ev_link},
        "top": top_rows,
        "fallbacks": sorted(({"name": k, "count": v} for k, v in fallback_counts.items()),
                            key=lambda r: -r["count"]),
        "memory": [mem[d] for d in sorted(mem)],
        "span_us": round(t1 - t0, 3),
        "summary": {
            "events": len(ev_lane),
            "cpu_events": len(cpu_events),
            "device_events": len(device_events),
            "lanes": len(lanes),
            "device_lanes": device_lanes,
            "cpu_lanes": len(lanes) - device_lanes,
            "fallbacks": sum(fallback_counts.values()),
            "memory_points": sum(len(m["t"]) for m in mem.values()),
            "device_time_us": round(device_total, 3),
        },
    }


def render_html(data: dict[str, Any], title: str) -> str:
    """The report page: the data as embedded JSON, the page drawing it."""
    blob = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return (_TEMPLATE.replace("__TITLE__", html.escape(title))
            .replace("__DATA__", blob))


def report(trace: str | os.PathLike, output: str | os.PathLike | None = None,
           title: str | None = None) -> dict[str, Any]:
    """Writes the HTML report of a torch.profiler chrome trace file and
    returns ``{"path": output, "summary": {...counts...}}``."""
    trace = os.fspath(trace)
    if output is None:
        base = trace[:-3] if trace.endswith(".gz") else trace
        output = (base[:-5] if base.endswith(".json") else base) + ".html"
    output = os.fspath(output)
    data = summarize(load_trace(trace))
    page = render_html(data, title or os.path.basename(trace))
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    with open(output, "w", encoding="utf-8") as f:
        f.write(page)
    return {"path": output, "summary": data["summary"]}


_TEMPLATE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>__TITLE__ — neuron profile</title>
<style>
body{font:13px system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{padding:10px 16px;background:#263238;color:#fff}
header h1{font-size:16px;margin:0 0 4px 0}
header .facts span{margin-right:18px;opacity:.9}
section{padding:8px 16px}
h2{font-size:14px;margin:10px 0 6px 0}
#tools button{margin-right:4px}
#tl,#mem{display:block;border:1px solid #ccc;background:#fff;width:100%;box-sizing:border-box}
#tip{position:fixed;pointer-events:none;background:#fffde7;border:1px solid #999;padding:4px 6px;
 font:12px monospace;display:none;white-space:pre;z-index:2}
table{border-collapse:collapse;font:12px monospace}
td,th{border:1px solid #ddd;padding:2px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}
tr.fallback td{background:#ffebee;color:#b71c1c}
.legend span{display:inline-block;margin-right:14px}
.sw{display:inline-block;width:12px;height:10px;margin-right:4px;vertical-align:middle}
</style></head>
<body>
<header><h1>__TITLE__</h1><div class="facts" id="facts"></div></header>
<div id="summary"></div>
<section>
<div id="tools"><button id="zin">zoom in</button><button id="zout">zoom out</button>
<button id="zreset">reset</button> <span id="range"></span>
<span style="margin-left:14px;color:#666">wheel: zoom, drag: pan, double-click: reset</span></div>
<div class="legend"><span><i class="sw" style="background:#d32f2f"></i>CPU fallback</span>
<span><i class="sw" style="background:#26a69a"></i>copy</span>
<span><i class="sw" style="background:#ef9a9a"></i>inside a fallback (its copies)</span>
<span><i class="sw" style="background:#7986cb"></i>kernel / op (colour by name)</span></div>
<canvas id="tl"></canvas>
<h2>Device memory</h2>
<canvas id="mem" height="160"></canvas>
</section>
<section><h2>Top ops by device time</h2><table id="top"></table></section>
<section><h2>CPU fallbacks</h2><table id="fb"></table></section>
<div id="tip"></div>
<script type="application/json" id="data">__DATA__</script>
<script>
(function(){
"use strict";
var D=JSON.parse(document.getElementById("data").textContent);
var E=D.ev, N=E.lane.length, LABEL=190, ROW=16, GAP=6;
var lanes=D.lanes, laneY=[], y=4;
for(var i=0;i<lanes.length;i++){laneY.push(y);y+=lanes[i].depth*ROW+GAP;}
var tl=document.getElementById("tl"), mc=document.getElementById("mem");
var tip=document.getElementById("tip");
var span=Math.max(D.span_us,1e-3), v0=0, v1=span;
var dpr=window.devicePixelRatio||1;
function fmt(us){return us>=1e6?(us/1e6).toFixed(3)+" s":us>=1e3?(us/1e3).toFixed(3)+" ms":us.toFixed(1)+" us";}
function fmtB(b){return b>=1<<30?(b/(1<<30)).toFixed(2)+" GiB":b>=1<<20?(b/(1<<20)).toFixed(2)+" MiB":b>=1024?(b/1024).toFixed(1)+" KiB":b+" B";}
function hue(s){var h=0;for(var i=0;i<s.length;i++)h=(h*31+s.charCodeAt(i))|0;return Math.abs(h)%360;}
function colour(k){var f=E.flags[k];
 if(f&1)return "#d32f2f"; if(f&4)return "#ef9a9a"; if(f&2)return "#26a69a";
 var n=D.names[E.name[k]]; return "hsl("+hue(n)+",45%,"+(lanes[E.lane[k]].kind==="device"?"55%":"70%")+")";}
function size(c,h){var w=c.clientWidth||800;c.style.height=h+"px";
 c.width=Math.round(w*dpr);c.height=Math.round(h*dpr);var g=c.getContext("2d");g.setTransform(dpr,0,0,dpr,0,0);return [g,w];}
var drawnEvents=0, drawnLanes=0;
function xOf(t,w){return LABEL+(t-v0)/(v1-v0)*(w-LABEL);}
function draw(){
 var r=size(tl,y+4), g=r[0], w=r[1]; drawnEvents=0; drawnLanes=0;
 g.fillStyle="#fff";g.fillRect(0,0,w,y+4);
 for(var l=0;l<lanes.length;l++){
  g.fillStyle=lanes[l].kind==="device"?"#eef3f8":"#f7f7f7";
  g.fillRect(0,laneY[l]-2,w,lanes[l].depth*ROW+4);
  drawnLanes++;
 }
 g.save();g.beginPath();g.rect(LABEL,0,w-LABEL,y+4);g.clip();
 var scale=(w-LABEL)/(v1-v0);
 for(var k=0;k<N;k++){
  var s=E.start[k], d=E.dur[k]; if(s+d<v0||s>v1)continue;
  var x=LABEL+(s-v0)*scale, ww=Math.max(d*scale,1);
  g.fillStyle=colour(k);
  g.fillRect(x,laneY[E.lane[k]]+E.depth[k]*ROW,ww,ROW-2);
  if(ww>40){g.fillStyle="#000";g.font="11px sans-serif";
   g.fillText(D.names[E.name[k]].slice(0,Math.floor(ww/6)),x+2,laneY[E.lane[k]]+E.depth[k]*ROW+11);}
  drawnEvents++;
 }
 g.restore();
 g.fillStyle="#222";g.font="12px sans-serif";
 for(var l2=0;l2<lanes.length;l2++){g.fillText(lanes[l2].name.slice(0,28),4,laneY[l2]+12);}
 g.strokeStyle="#bbb";g.beginPath();g.moveTo(LABEL-0.5,0);g.lineTo(LABEL-0.5,y+4);g.stroke();
 document.getElementById("range").textContent=fmt(v0)+" – "+fmt(v1)+" (span "+fmt(v1-v0)+")";
 drawMem();
 var sm=document.getElementById("summary");
 sm.setAttribute("data-events",drawnEvents);sm.setAttribute("data-lanes",drawnLanes);
}
function drawMem(){
 var r=size(mc,160), g=r[0], w=r[1], H=160, top=8, bot=20;
 g.fillStyle="#fff";g.fillRect(0,0,w,H);
 var M=D.memory, mx=1;
 M.forEach(function(m){m.reserved.forEach(function(b){mx=Math.max(mx,b);});m.allocated.forEach(function(b){mx=Math.max(mx,b);});});
 g.fillStyle="#222";g.font="11px sans-serif";g.fillText(fmtB(mx),4,top+8);g.fillText("0",4,H-bot);
 if(!M.length){g.fillText("no device memory events (profile_memory=True records them)",LABEL+8,H/2);return;}
 var cols=["#3949ab","#e65100","#2e7d32","#6a1b9a"];
 M.forEach(function(m,i){[["allocated",[]],["reserved",[4,3]]].forEach(function(kv){
  var vals=m[kv[0]];g.strokeStyle=cols[i%cols.length];g.setLineDash(kv[1]);g.beginPath();
  var prev=null;
  for(var j=0;j<m.t.length;j++){var x=xOf(m.t[j],w), yy=H-bot-(vals[j]/mx)*(H-top-bot);
   if(prev===null)g.moveTo(Math.max(x,LABEL),yy);else{g.lineTo(Math.max(x,LABEL),prev);g.lineTo(Math.max(x,LABEL),yy);}prev=yy;}
  if(prev!==null)g.lineTo(w,prev);g.stroke();g.setLineDash([]);});
  g.fillStyle=cols[i%cols.length];g.fillText("neuron:"+m.device+" allocated (solid) / reserved (dashed)",LABEL+8,top+10+i*13);
 });
}
function zoom(f,at){var c=at===undefined?(v0+v1)/2:at, nw=Math.min(span,Math.max((v1-v0)*f,1e-3));
 v0=c-(c-v0)*nw/(v1-v0);v1=v0+nw;if(v0<0){v1-=v0;v0=0;}if(v1>span){v0-=v1-span;v1=span;if(v0<0)v0=0;}draw();}
function tAt(ev){var r=tl.getBoundingClientRect();return v0+(ev.clientX-r.left-LABEL)/(r.width-LABEL)*(v1-v0);}
tl.addEventListener("wheel",function(ev){ev.preventDefault();zoom(ev.deltaY>0?1.25:0.8,tAt(ev));},{passive:false});
var drag=null;
tl.addEventListener("mousedown",function(ev){drag={x:ev.clientX,v0:v0,v1:v1};});
window.addEventListener("mouseup",function(){drag=null;});
tl.addEventListener("dblclick",function(){v0=0;v1=span;draw();});
tl.addEventListener("mousemove",function(ev){
 var r=tl.getBoundingClientRect();
 if(drag){var dt=(ev.clientX-drag.x)/(r.width-LABEL)*(drag.v1-drag.v0);
  v0=Math.max(0,drag.v0-dt);v1=v0+(drag.v1-drag.v0);if(v1>span){v1=span;v0=span-(drag.v1-drag.v0);}draw();return;}
 var yy=ev.clientY-r.top, t=tAt(ev), hit=-1, tol=3*(v1-v0)/(r.width-LABEL);
 for(var k=0;k<N;k++){var ly=laneY[E.lane[k]]+E.depth[k]*ROW;
  if(yy>=ly&&yy<ly+ROW&&t>=E.start[k]-tol&&t<=E.start[k]+E.dur[k]+tol){hit=k;}}
 if(hit<0){tip.style.display="none";return;}
 var txt=D.names[E.name[hit]]+"\n"+lanes[E.lane[hit]].name+"\nstart "+fmt(E.start[hit])+"  dur "+fmt(E.dur[hit]);
 if(E.link[hit])txt+="\ncorrelation "+E.link[hit];
 if(E.flags[hit]&1)txt+="\nCPU fallback";if(E.flags[hit]&4)txt+="\ninside a CPU fallback";
 tip.textContent=txt;tip.style.display="block";tip.style.left=(ev.clientX+12)+"px";tip.style.top=(ev.clientY+12)+"px";
});
tl.addEventListener("mouseleave",function(){tip.style.display="none";});
document.getElementById("zin").onclick=function(){zoom(0.5);};
document.getElementById("zout").onclick=function(){zoom(2);};
document.getElementById("zreset").onclick=function(){v0=0;v1=span;draw();};
function table(id,head,rows){var t=document.getElementById(id),h="<tr>"+head.map(function(x){return "<th>"+x+"</th>";}).join("")+"</tr>";
 rows.forEach(function(r){h+="<tr"+(r.cls?' class="'+r.cls+'"':"")+">"+r.cells.map(function(x){
  return "<td>"+String(x).replace(/&/g,"&amp;").replace(/</g,"&lt;")+"</td>";}).join("")+"</tr>";});t.innerHTML=h;}
var total=D.summary.device_time_us||1;
table("top",["op (fallbacks in red)","device tasks","device time","of all device time","of which copies"],
 D.top.slice(0,30).map(function(r){return {cls:r.fallback?"fallback":"",cells:[r.name,r.tasks,fmt(r.device_us),
  (100*r.device_us/total).toFixed(1)+" %",fmt(r.copies_us)]};}));
table("fb",["op that fell back to the CPU","times"],D.fallbacks.length?D.fallbacks.map(function(r){
 return {cls:"fallback",cells:[r.name,r.count]};}):[{cells:["none",""]}]);
var S=D.summary;
document.getElementById("facts").innerHTML=["span "+fmt(D.span_us),S.cpu_events+" CPU events",
 S.device_events+" device tasks ("+fmt(S.device_time_us)+")",S.device_lanes+" device streams",
 S.fallbacks+" CPU fallbacks"].map(function(s){return "<span>"+s+"</span>";}).join("");
window.addEventListener("resize",draw);
draw();
var sm=document.getElementById("summary");
sm.setAttribute("data-device-lanes",S.device_lanes);sm.setAttribute("data-fallbacks",D.fallbacks.length);
sm.setAttribute("data-top-rows",document.querySelectorAll("#top tr").length-1);
sm.setAttribute("data-rendered","1");
})();
</script>
</body></html>
"""
