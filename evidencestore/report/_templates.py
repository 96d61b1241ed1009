"""Jinja2 templates as string constants (no package data to ship, nothing read at run time).

The page is self-contained: one inline stylesheet, one small inline script (copy buttons,
optional: the page reads fully without it; the Content-Security-Policy allows it by its
hash, ``SCRIPT_HASH``, and no other script), SVG plots and PNG ``data:`` thumbnails inline,
and the system font stack. Verdicts carry a word, a glyph and a border pattern besides
their colour, so a greyscale print still tells them apart.
"""

from __future__ import annotations

import base64
import hashlib

__all__ = ["SCRIPT_HASH", "TEMPLATES"]

_CSS = """
:root{--fg:#111;--muted:#555;--line:#d4d4d4;--bg:#fff;--soft:#f5f5f4;
--pass:#166534;--pass-bg:#dcfce7;--fail:#991b1b;--fail-bg:#fee2e2;
--inc:#854d0e;--inc-bg:#fef9c3;--na:#374151;--na-bg:#e5e7eb}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0 auto;max-width:72rem;padding:1rem 1.25rem 3rem;color:var(--fg);background:var(--bg);
font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
h1{font-size:1.45rem;margin:.2rem 0 .6rem;overflow-wrap:anywhere}
h2{font-size:1.15rem;margin:1.8rem 0 .6rem;padding-bottom:.2rem;border-bottom:2px solid var(--line)}
h3{font-size:1rem;margin:1.2rem 0 .4rem}
p{margin:.4rem 0}
.kind{color:var(--muted);font-size:.85rem;text-transform:uppercase;letter-spacing:.06em;margin:0}
.verdict{display:flex;gap:1rem;align-items:center;flex-wrap:wrap;padding:.8rem 1rem;margin:.6rem 0 1rem;
border-radius:.4rem;border:3px solid}
.verdict .word{font-size:1.9rem;font-weight:800;letter-spacing:.04em;white-space:nowrap}
.verdict .glyph{font-size:1.6rem;font-weight:800}
.verdict .meaning{flex:1 1 18rem;margin:0}
.v-PASS{color:var(--pass);background:var(--pass-bg);border-style:solid}
.v-FAIL{color:var(--fail);background:var(--fail-bg);border-style:double;border-width:6px}
.v-INCONCLUSIVE{color:var(--inc);background:var(--inc-bg);border-style:dashed}
.v-UNAVAILABLE{color:var(--na);background:var(--na-bg);border-style:dotted}
.tag{display:inline-block;padding:0 .45rem;border-radius:.25rem;border:1.5px solid;font-weight:700;
font-size:.8rem;white-space:nowrap}
.ok{color:var(--pass);border-color:var(--pass);background:var(--pass-bg)}
.bad{color:var(--fail);border-color:var(--fail);background:var(--fail-bg);border-style:double;border-width:3px}
.warn{color:var(--inc);border-color:var(--inc);background:var(--inc-bg);border-style:dashed}
.none{color:var(--na);border-color:var(--na);background:var(--na-bg);border-style:dotted}
ul.reasons{margin:.3rem 0 .8rem;padding-left:1.3rem}
.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(11rem,1fr));gap:.5rem;margin:.6rem 0}
.fact{background:var(--soft);border:1px solid var(--line);border-radius:.35rem;padding:.4rem .6rem}
.fact b{display:block;font-size:1.1rem;overflow-wrap:anywhere}
.fact span{color:var(--muted);font-size:.8rem}
.table-wrap{overflow-x:auto;margin:.4rem 0 .8rem}
table{border-collapse:collapse;width:100%;font-size:.88rem}
th,td{border-bottom:1px solid var(--line);padding:.3rem .45rem;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}
table.compact{width:auto;min-width:20rem}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.failed td{background:var(--fail-bg)}
table.checks,table.wide{min-width:44rem}
table.checks td:last-child{min-width:16rem}
figure{margin:.6rem 0 1rem;padding:0}
figure.plot{overflow-x:auto}
figure svg{display:block;width:100%;height:auto;max-width:38rem}
figcaption{color:var(--muted);font-size:.85rem;margin-top:.2rem}
.thumbs{display:grid;grid-template-columns:repeat(3,minmax(0,1fr));gap:.6rem;max-width:60rem}
.thumbs figure{margin:0}
.thumbs img{display:block;width:100%;height:auto;image-rendering:pixelated;border:1px solid var(--line)}
.digest-row{display:flex;gap:.35rem;align-items:baseline;flex-wrap:wrap}
code,.digest{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:.8rem}
.digest{overflow-wrap:anywhere;word-break:break-all;user-select:all;-webkit-user-select:all;
background:var(--soft);padding:0 .2rem;border-radius:.2rem}
button.copy{font:inherit;font-size:.72rem;padding:0 .4rem;border:1px solid var(--line);
border-radius:.25rem;background:#fff;cursor:pointer;color:var(--muted)}
.note{color:var(--muted);font-size:.88rem}
.matrix td.cell{min-width:8rem}
code.short{display:inline-block;max-width:19ch;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;
vertical-align:bottom;word-break:normal;overflow-wrap:normal}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(15rem,1fr));gap:.6rem;margin:.5rem 0 1rem}
.card{border:1px solid var(--line);border-radius:.4rem;padding:.5rem .7rem;background:#fff}
.card h3{margin:0 0 .3rem;font-size:.98rem;display:flex;gap:.4rem;flex-wrap:wrap;align-items:baseline}
.card p,.card div{margin:.15rem 0;font-size:.88rem}
.c-qualified{border-left:6px solid var(--pass)}.c-rejected{border-left:6px double var(--fail)}
.c-withdrawn{border-left:6px dotted var(--na)}.c-open{border-left:6px dashed var(--inc)}
details{margin:.4rem 0}details>summary{cursor:pointer;color:var(--muted)}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,30rem),1fr));gap:.6rem}
.plots figure svg{min-width:0}
body[data-report="campaign"] figure svg{min-width:0}
footer{margin-top:2.5rem;color:var(--muted);font-size:.8rem;border-top:1px solid var(--line);padding-top:.6rem}
@media (max-width:40rem){body{padding:.6rem .7rem 2rem;font-size:14px}
.verdict .word{font-size:1.5rem}th,td{padding:.25rem .3rem}.thumbs{gap:.3rem}
.thumbs figcaption{font-size:.72rem}}
@media print{body{max-width:none;padding:0;font-size:10.5pt}button.copy{display:none}
figure svg{min-width:0}table.checks,table.wide{min-width:0}
h2{break-after:avoid}figure,tr,.verdict,.fact{break-inside:avoid}
.table-wrap{overflow:visible}a{color:inherit;text-decoration:none}
*{-webkit-print-color-adjust:exact;print-color-adjust:exact}}
"""

_SCRIPT = """
document.addEventListener('click',function(e){var b=e.target.closest('button.copy');if(!b)return;
var t=b.getAttribute('data-copy');function done(){b.textContent='copied';
setTimeout(function(){b.textContent='copy'},1200)}
if(navigator.clipboard&&window.isSecureContext){navigator.clipboard.writeText(t).then(done,function(){});}
else{var r=document.createRange();var c=b.previousElementSibling;if(c){r.selectNodeContents(c);
var s=window.getSelection();s.removeAllRanges();s.addRange(r);}}});
"""

#: The page's one script, allowed by its hash: the Content-Security-Policy runs no other
#: inline script (one injected into a page by a crafted record is blocked), and no
#: ``'unsafe-inline'`` for scripts.
SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()

_BASE = (
    """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src '"""
    + SCRIPT_HASH
    + """'">
<title>{{ title }}</title>
<style>"""
    + _CSS
    + """</style></head>
<body data-report="{{ report_kind }}"{% if verdict %} data-verdict="{{ verdict }}"{% endif %}>
<header>
<p class="kind">{{ kind_label }}</p>
<h1>{{ title }}</h1>
{% if verdict %}{{ m.verdict_box(verdict, meaning, verdict_style) }}{% endif %}
</header>
<main>
{% block body %}{% endblock %}
</main>
<section id="provenance">{% if fold_provenance is defined and fold_provenance %}<details><summary><h2 style="display:inline">Provenance: every digest shown</h2> ({{ digests|length }})</summary>{% else %}
<h2>Provenance: every digest shown</h2>{% endif %}
<p class="note">The report is derived only from the records and blobs below, each addressed by
digest; re-check them with <code>evstore verify</code>.</p>
<div class="table-wrap"><table class="digests"><thead><tr><th>what</th><th>digest</th></tr></thead><tbody>
{% for where, d in digests %}<tr><td><code>{{ where }}</code></td><td>{{ m.digest(d) }}</td></tr>
{% endfor %}</tbody></table></div>
{% if versions %}<h3>Tool versions</h3><div class="table-wrap"><table><tbody>
{% for k, v in versions %}<tr><th>{{ k }}</th><td><code>{{ v }}</code></td></tr>{% endfor %}
</tbody></table></div>{% endif %}{% if fold_provenance is defined and fold_provenance %}</details>{% endif %}
</section>
<footer>Generated by evidencestore {{ generator }} from stored records only; no network access is
needed to read it.</footer>
<script>"""
    + _SCRIPT
    + """</script>
</body></html>
"""
)

_MACROS = """
{% macro digest(d) -%}
<span class="digest-row"><code class="digest" data-digest="{{ d }}">{{ d }}</code><button class="copy" type="button" data-copy="{{ d }}" aria-label="copy digest">copy</button></span>
{%- endmacro %}
{% macro short(d, label=none) -%}
<span class="digest-row">{% if label %}<span>{{ label }}</span> {% endif %}<code class="digest short" title="{{ d }}" data-digest="{{ d }}">{{ d }}</code><button class="copy" type="button" data-copy="{{ d }}" aria-label="copy digest">copy</button></span>
{%- endmacro %}
{% macro glyph(v) -%}
{%- if v == "PASS" %}&#10004;{% elif v == "FAIL" %}&#10006;{% elif v == "INCONCLUSIVE" %}?{% else %}&#8709;{% endif -%}
{%- endmacro %}
{% macro verdict_box(v, meaning, style) -%}
<div class="verdict v-{{ style }}" id="verdict" role="status"><span class="glyph" aria-hidden="true">{{ glyph(style) }}</span>
<span class="word">{{ v }}</span><p class="meaning">{{ meaning }}</p></div>
{%- endmacro %}
{% macro tag(v) -%}
{%- set cls = {"PASS": "ok", "FAIL": "bad", "INCONCLUSIVE": "warn", "UNAVAILABLE": "none",
"ok": "ok", "FAILED": "bad", "complete": "ok", "partial": "warn",
"failed-before-inference": "bad", "invalid": "bad", "never-started": "none", "open": "none", "done": "ok", "repeatable-exact": "ok",
"not-repeatable": "warn", "exact": "ok", "not-exact": "warn", "unavailable": "warn", "ACCEPTED": "ok",
"NOT_ACCEPTED": "warn", "qualified": "ok", "rejected": "bad", "withdrawn": "none",
"STANDS": "ok", "NOT_CLEARED": "bad", "UNRESOLVED": "warn", "REFUSED": "none"}.get(v, "none") -%}
<span class="tag {{ cls }}">{{ v }}</span>
{%- endmacro %}
{% macro okword(ok) -%}
{%- if ok %}<span class="tag ok">ok</span>{% else %}<span class="tag bad">FAILED</span>{% endif -%}
{%- endmacro %}
{% macro checks(rows) -%}
<div class="table-wrap"><table class="checks"><thead><tr><th>check</th><th>result</th>
<th>expected</th><th>observed</th><th>detail</th></tr></thead><tbody>
{% for c in rows %}<tr class="{{ '' if c.ok else 'failed' }}"><td><code>{{ c.name }}</code></td>
<td>{{ okword(c.ok) }}</td><td class="num">{{ c.expected }}</td><td class="num">{{ c.observed }}</td>
<td>{{ c.message }}</td></tr>
{% else %}<tr><td colspan="5" class="note">none</td></tr>{% endfor %}
</tbody></table></div>
{%- endmacro %}
{% macro plot(p) -%}
<figure class="plot"{% for k, v in p.facts.items() %} data-{{ k }}="{{ v }}"{% endfor %}>
{{ p.svg | safe }}
<figcaption>{{ p.title }}</figcaption></figure>
{%- endmacro %}
{% macro facts(rows) -%}
<div class="facts">{% for label, value in rows %}<div class="fact"><b>{{ value }}</b><span>{{ label }}</span></div>{% endfor %}</div>
{%- endmacro %}
"""

_COMPARISON = """{% extends "base.html" %}{% import "macros.html" as m %}
{% block body %}
<section id="summary">
<ul class="reasons">{% for r in reasons %}<li>{{ r }}</li>{% endfor %}</ul>
{{ m.facts(summary) }}
</section>
{% for v in videos %}<section id="video-{{ v.pair }}" class="video"><h2>Video{{ ' (stream pair %d)' % v.pair if v.pair else '' }}</h2>
{{ m.facts(v.facts) }}
{% if v.all_identical %}<p class="identical-all" data-frames="{{ v.frames }}">Every frame identical: all {{ v.frames }} of {{ v.frames }} decoded frames are exactly equal (no PSNR: it is infinite, not capped).</p>{% endif %}
{% for p in v.plots %}{{ m.plot(p) }}{% endfor %}
{% if v.worst is not none %}<h3 id="worst-frame">Worst frame: <span class="worst-frame" data-frame="{{ v.worst }}">frame {{ v.worst }}</span></h3>
<div class="table-wrap"><table class="compact"><thead><tr><th>plane</th><th>MSE</th><th>PSNR</th></tr></thead><tbody>
{% for pl in v.worst_planes %}<tr><td>{{ pl.name }}</td><td class="num">{{ pl.mse }}</td><td class="num">{{ pl.psnr }}</td></tr>{% endfor %}
</tbody></table></div>
{% if v.thumbs %}<div class="thumbs">{% for t in v.thumbs %}<figure><img src="{{ t.uri }}" alt="{{ t.alt }}" width="{{ t.width }}" height="{{ t.height }}"><figcaption>{{ t.caption }}</figcaption></figure>{% endfor %}</div>
{% elif v.thumb_note %}<p class="note">{{ v.thumb_note }}</p>{% endif %}
{% endif %}
</section>{% endfor %}
{% for a in audios %}<section id="audio-{{ a.pair }}" class="audio"><h2>Audio{{ ' (stream pair %d)' % a.pair if a.pair else '' }}</h2>
{{ m.facts(a.facts) }}
{% if a.plot %}{{ m.plot(a.plot) }}{% elif a.note %}<p class="note">{{ a.note }}</p>{% endif %}
</section>{% endfor %}
{% if audio_failures %}<section id="audio-invalid" class="audio"><h2>Audio: why it is invalid</h2>
{% for f in audio_failures %}<h3>{{ f.role }}: {{ f.name }}</h3>
{{ m.facts(f.facts) }}
{% if f.where %}<ul class="reasons">{% for w in f.where %}<li>{{ w }}</li>{% endfor %}</ul>{% endif %}
{{ m.checks(f.checks) }}
{% endfor %}</section>{% endif %}
{% if threshold_checks %}<section id="thresholds"><h2>Thresholds</h2>{{ m.checks(threshold_checks) }}</section>{% endif %}
<section id="inputs"><h2>Inputs against the request's expectations</h2>
{% for side in inputs %}<h3>{{ side.role }}: {{ side.name }} {{ m.okword(side.valid) }}</h3>
<p>{{ side.container }}, {{ side.size }} bytes: {{ m.digest(side.digest) }}</p>
{{ m.checks(side.checks) }}
{% endfor %}
{% if compatibility %}<h3>Compatibility (reference = expected)</h3>{{ m.checks(compatibility) }}{% endif %}
<h3>Exact equality of decoded content</h3>
<div class="table-wrap"><table class="wide"><thead><tr><th>stream pair</th><th>equal</th><th>first difference</th>
<th>reference</th><th>candidate</th></tr></thead><tbody>
{% for e in equality %}<tr class="{{ '' if e.equal else 'failed' }}"><td>{{ e.type }} {{ e.pair }}</td>
<td>{% if e.equal %}<span class="tag ok">identical</span>{% else %}<span class="tag warn">differs</span>{% endif %}</td>
<td class="num">{{ 'frame %d' % e.first_difference if e.first_difference is not none else '' }}</td>
<td>{% if e.reference %}{{ m.digest(e.reference) }}{% endif %}</td><td>{% if e.candidate %}{{ m.digest(e.candidate) }}{% endif %}</td></tr>
{% endfor %}</tbody></table></div>
</section>
<section id="request"><h2>Expectations and thresholds</h2>
<div class="table-wrap"><table><tbody>{% for k, v in settings %}<tr><th><code>{{ k }}</code></th><td><code>{{ v }}</code></td></tr>{% endfor %}</tbody></table></div>
{% if scorers %}<h3>Scorers</h3><div class="table-wrap"><table><tbody>{% for name, prov in scorers %}{% for k, v in prov %}
<tr><th>{{ name }} {{ k }}</th><td>{% if v.startswith('blake3:') %}{{ m.digest(v) }}{% else %}<code>{{ v }}</code>{% endif %}</td></tr>{% endfor %}{% endfor %}</tbody></table></div>{% endif %}
</section>
{% endblock %}
"""

_RUN = """{% extends "base.html" %}{% import "macros.html" as m %}
{% block body %}
<section id="summary">{{ m.facts(facts) }}</section>
<section id="latency"><h2>Latency of measured requests (warmup apart)</h2>
{% for p in plots %}{{ m.plot(p) }}{% else %}<p class="note">No request reached its last byte: no latency to show.</p>{% endfor %}
<div class="table-wrap"><table class="compact"><tbody>{% for label, text in summaries %}<tr><th>{{ label }}</th><td>{{ text }}</td></tr>{% endfor %}</tbody></table></div>
<p class="note">Failed requests are listed below and never contribute a latency (their times are shown in parentheses).</p>
</section>
<section id="failures"><h2>Failures</h2>
{% if failures %}<p>{% for cls, n in by_class %}<span class="tag bad">{{ cls }}</span> {{ n }}&nbsp; {% endfor %}</p>
<div class="table-wrap"><table class="wide"><thead><tr><th>request</th><th>phase</th><th>class</th><th>detail</th></tr></thead><tbody>
{% for f in failures %}<tr class="failed" id="request-{{ f.index }}-failure"><td class="num"><a href="#request-{{ f.index }}">{{ f.index }}</a></td><td>{{ f.phase }}</td><td><span class="tag bad">{{ f.cls }}</span></td><td>{{ f.message }}</td></tr>{% endfor %}
</tbody></table></div>{% elif requests %}<p><span class="tag ok">none</span> {{ no_failure_note }}</p>{% else %}<p><span class="tag bad">none sent</span> {{ no_failure_note }}</p>{% endif %}
</section>
<section id="requests"><h2>Requests</h2>
<div class="table-wrap"><table class="wide"><thead><tr><th>#</th><th>phase</th><th>status</th><th>E2E (s)</th><th>TTFB (s)</th><th>bytes</th><th>failure</th><th>body</th></tr></thead><tbody>
{% for r in requests %}<tr id="request-{{ r.index }}" class="{{ 'failed' if r.failure else '' }}"><td class="num">{{ r.index }}</td><td>{{ r.phase }}</td><td class="num">{{ r.status }}</td><td class="num">{{ r.e2e }}</td><td class="num">{{ r.ttfb }}</td><td class="num">{{ r.size }}</td>
<td>{% if r.failure %}<span class="tag bad">{{ r.failure }}</span>{% else %}<span class="tag ok">none</span>{% endif %}</td><td>{% if r.digest %}{{ m.digest(r.digest) }}{% endif %}</td></tr>
{% endfor %}</tbody></table></div>
</section>
{% if settings %}<section id="run-settings"><h2>Run</h2><div class="table-wrap"><table><tbody>{% for k, v in settings %}<tr><th><code>{{ k }}</code></th><td><code>{{ v }}</code></td></tr>{% endfor %}</tbody></table></div></section>{% endif %}
{% endblock %}
"""

_CAMPAIGN = """{% extends "base.html" %}{% import "macros.html" as m %}
{% block body %}
{% if protocol %}<section id="protocol"><h2>What is claimed</h2>
{% if protocol.description %}<p>{{ protocol.description }}</p>{% endif %}
<div class="table-wrap"><table class="compact"><tbody>
<tr><th>conditions</th><td>{% for name, workload, digest, harness in protocol.conditions %}<div><b>{{ name }}</b>: <code>{{ workload }}</code>{% if harness %} ({{ harness }} runs){% endif %}{% if digest %} {{ m.short(digest) }}{% endif %}</div>{% endfor %}</td></tr>
<tr><th>arms</th><td>{% for name, role, runs in protocol.arms %}<div><b>{{ name }}</b> ({{ role }}): {{ runs }} run(s) per condition</div>{% endfor %}</td></tr>
<tr><th>lossless</th><td>a candidate's outputs exactly equal the baseline's (decoded media, tokens), under a repeatable baseline; a baseline that is not: {{ protocol.non_repeatable_baseline }}</td></tr>
<tr><th>metric</th><td>{% if protocol.claim %}<code>{{ protocol.metric }}</code>, {{ protocol.estimator }}, {{ protocol.min_runs }} complete runs per arm, order {{ protocol.order }}{% else %}no timing claim (<code>timing.claim = false</code>){% endif %}</td></tr>
{% if protocol.claim %}<tr><th>threshold</th><td>the {{ "%g"|format(protocol.confidence * 100) }}% interval's low end must exceed <code>min_speedup = {{ "%g"|format(protocol.min_speedup) }}</code></td></tr>{% endif %}
<tr><th>accept</th><td><code>{{ protocol.accept }}</code>: the campaign is accepted when {{ accept_rule }}</td></tr>
<tr><th>protocol</th><td>{{ m.short(protocol.digest) }}</td></tr>
</tbody></table></div></section>{% endif %}
{% if arm_conclusions %}<section id="conclusions"><h2>Conclusions per arm</h2>
<p class="note">The campaign is accepted when {{ accept_rule }}.</p>
<div class="cards">{% for a in arm_conclusions %}<div class="card c-{{ a.conclusion }}" id="arm-{{ a.arm }}"><h3>{{ a.arm }} <span class="note">{{ a.role }}</span> {{ m.tag(a.conclusion) }}</h3>
{% for r in a.reasons %}<p>{{ r }}</p>{% endfor %}</div>{% endfor %}</div>
</section>{% endif %}
{% if missing %}<section id="missing"><h2>Inputs that cannot be had here</h2>
<p>Fetch them with <code>evstore pull</code> (or configure the remote that holds them), then run the status again.</p>
<ul class="reasons">{% for d, what in missing %}<li>{{ m.short(d) }} {{ what }}</li>{% endfor %}</ul></section>{% endif %}
<section id="remaining"><h2>What remains</h2>
{% if remaining %}<ul class="reasons">{% for r in remaining %}<li>{{ r }}</li>{% endfor %}</ul>{% elif verdict == "ACCEPTED" %}<p><span class="tag ok">nothing</span> every condition is qualified.</p>{% else %}<p><span class="tag none">nothing</span> no further run or record is expected: the verdict follows from the conclusions above.</p>{% endif %}
</section>
<section id="speedups"><h2>Speedup intervals</h2>
{% for p in plots %}{{ m.plot(p) }}{% else %}<p class="note">No speedup claim yet.</p>{% endfor %}
</section>
{% if latency_plots %}<section id="latency"><h2>Latency per arm</h2><div class="plots">
{% for p in latency_plots %}{{ m.plot(p) }}{% endfor %}</div></section>{% endif %}
<section id="matrix"><h2>Conditions &times; arms</h2>
{% for c in conditions %}<h3>{{ c }}</h3><div class="cards">{% for a in arms %}{% set cell = matrix.get((c, a)) %}{% if cell %}
<div class="card{% if cell.conclusion %} c-{{ cell.conclusion }}{% endif %}" id="{{ cell.id }}"><h3>{{ a }}{% if cell.conclusion %} {{ m.tag(cell.conclusion) }}{% elif cell.qualified is not none %}{% if cell.qualified %} <span class="tag ok">qualified</span>{% else %} <span class="tag warn">not qualified</span>{% endif %}{% endif %}</h3>
<div>runs {{ cell.runs }}{% if cell.failed not in ('0', '—') %}, <span class="tag bad">{{ cell.failed }} failed</span>{% endif %}</div>
{% if cell.repeatability is not none %}<div>repeatability {{ m.tag(cell.repeatability) }}</div>{% endif %}
{% for r in cell.failed_runs %}<div class="note">failed run: {{ r }}</div>{% endfor %}
{% if not cell.baseline %}<div>lossless {% if cell.lossless is not none %}{{ m.tag(cell.lossless) }}{% else %}<span class="tag none">not judged</span>{% endif %}</div>
<div>speedup {{ cell.speedup }}</div>{% endif %}
{% for r in cell.reasons %}<div class="note">{{ r }}</div>{% endfor %}
{% for label, d, anchor in cell.refs %}<div class="note"><a href="#{{ anchor }}">{{ label }}</a></div>{% endfor %}
{% for kind, rid in cell.links %}<div class="note"><a href="#{{ rid }}">{{ kind }}</a></div>{% endfor %}
</div>{% endif %}{% endfor %}</div>{% endfor %}
</section>
{% if excluded or notes or set_aside %}<section id="excluded"><h2>Runs set aside, excluded, and notes</h2><ul class="reasons">
{% for e in set_aside %}<li><span class="tag none">{{ e[0] }}</span> {{ e[1] }}</li>{% endfor %}
{% for e in excluded %}<li><span class="tag bad">excluded</span> {{ e }}</li>{% endfor %}{% for n in notes %}<li>{{ n }}</li>{% endfor %}</ul></section>{% endif %}
{% for x in related %}<section id="{{ x.id }}" class="related"><h2>{{ x.title }}{% if x.verdict %} {{ m.tag(x.verdict) }}{% endif %}</h2>
{% if x.summary %}<p>{{ x.summary }}</p>{% endif %}
{% if x.reasons %}<ul class="reasons">{% for r in x.reasons %}<li>{{ r }}</li>{% endfor %}</ul>{% endif %}
{% if x.runs %}<div class="table-wrap"><table><thead><tr><th>run</th><th>arm</th><th>value (s)</th><th>measured E2E (s)</th><th>CV</th></tr></thead><tbody>
{% for v in x.runs %}<tr{% if v.anchor %} id="{{ v.anchor }}"{% endif %}><td>{% if v.digest %}{{ m.short(v.digest, v.run) }}{% else %}{{ v.run }}{% endif %}</td><td>{{ v.arm }}</td><td class="num">{{ v.value }}</td><td>{{ v.latencies }}</td><td class="num">{{ v.cv }}</td></tr>{% endfor %}
</tbody></table></div>{% endif %}
{% if x.comparisons %}<details><summary>{{ x.comparisons|length }} output comparison(s): {{ x.comparison_summary }}</summary><div class="table-wrap"><table><thead><tr><th>output</th><th>verdict</th><th>reference / candidate</th><th>comparison record</th><th>reasons</th></tr></thead><tbody>
{% for c in x.comparisons %}<tr{% if c.anchor %} id="{{ c.anchor }}"{% endif %}><td>{{ c.key }}</td><td>{{ m.tag(c.verdict) }}</td><td>{% if c.reference %}{{ m.short(c.reference) }}{% endif %}{% if c.candidate %}{{ m.short(c.candidate) }}{% endif %}</td><td>{% if c.record %}{{ m.short(c.record) }}{% endif %}</td><td>{{ c.reasons }}</td></tr>{% endfor %}
</tbody></table></div><p class="note">Render a comparison record with <code>evstore report DIGEST -o OUT.html</code>.</p></details>{% endif %}
{% if x.run_digests %}<p>Runs: {% for d, anchor, label in x.run_digests %}<span{% if anchor %} id="{{ anchor }}"{% endif %}>{{ m.short(d, label) }}</span> {% endfor %}</p>{% endif %}
{% if x.config_diff %}<details><summary>Configuration difference ({{ x.config_diff|length }})</summary><ul>{% for row in x.config_diff %}<li><code>{{ row }}</code></li>{% endfor %}</ul></details>{% endif %}
{% if x.excluded %}<ul>{% for e in x.excluded %}<li><span class="tag bad">excluded</span> {{ e }}</li>{% endfor %}</ul>{% endif %}
<details><summary>All fields</summary>{{ m.facts(x.facts) }}</details>
</section>{% endfor %}
{% if cited %}<section id="cited"><h2>Runs and comparisons cited</h2>
<div class="table-wrap"><table><thead><tr><th>cited by</th><th>record</th></tr></thead><tbody>
{% for d, where, anchor in cited %}<tr id="{{ anchor }}"><td>{{ where }}</td><td>{{ m.short(d) }}</td></tr>{% endfor %}
</tbody></table></div><p class="note">Render any of them with <code>evstore report DIGEST -o OUT.html</code>.</p>
</section>{% endif %}
{% endblock %}
"""

_CAMPAIGN_RECORD = """{% extends "base.html" %}{% import "macros.html" as m %}
{% block body %}
{% for x in related %}<section id="{{ x.id }}" class="related"><h2>{{ x.title }}{% if x.verdict %} {{ m.tag(x.verdict) }}{% endif %}</h2>
{% if x.summary %}<p>{{ x.summary }}</p>{% endif %}
{% if x.reasons %}<ul class="reasons">{% for r in x.reasons %}<li>{{ r }}</li>{% endfor %}</ul>{% endif %}
{% if x.runs %}<div class="table-wrap"><table><thead><tr><th>run</th><th>arm</th><th>value (s)</th><th>measured E2E (s)</th><th>CV</th></tr></thead><tbody>
{% for v in x.runs %}<tr><td>{% if v.digest %}{{ m.short(v.digest, v.run) }}{% else %}{{ v.run }}{% endif %}</td><td>{{ v.arm }}</td><td class="num">{{ v.value }}</td><td>{{ v.latencies }}</td><td class="num">{{ v.cv }}</td></tr>{% endfor %}
</tbody></table></div>{% endif %}
{% if x.comparisons %}<div class="table-wrap"><table><thead><tr><th>output</th><th>verdict</th><th>reference / candidate</th><th>comparison record</th><th>reasons</th></tr></thead><tbody>
{% for c in x.comparisons %}<tr><td>{{ c.key }}</td><td>{{ m.tag(c.verdict) }}</td><td>{% if c.reference %}{{ m.short(c.reference) }}{% endif %}{% if c.candidate %}{{ m.short(c.candidate) }}{% endif %}</td><td>{% if c.record %}{{ m.short(c.record) }}{% endif %}</td><td>{{ c.reasons }}</td></tr>{% endfor %}
</tbody></table></div>{% endif %}
{% if x.run_digests %}<p>Runs: {% for d, anchor, label in x.run_digests %}{{ m.short(d, label) }} {% endfor %}</p>{% endif %}
{% if x.config_diff %}<details><summary>Configuration difference ({{ x.config_diff|length }})</summary><ul>{% for row in x.config_diff %}<li><code>{{ row }}</code></li>{% endfor %}</ul></details>{% endif %}
<h3>Fields</h3>{{ m.facts(x.facts) }}
</section>{% endfor %}
{% for p in plots %}{{ m.plot(p) }}{% endfor %}
{% endblock %}
"""

TEMPLATES: dict[str, str] = {
    "base.html": "{% import 'macros.html' as m %}" + _BASE,
    "macros.html": _MACROS,
    "comparison.html": _COMPARISON,
    "run.html": _RUN,
    "campaign.html": _CAMPAIGN,
    "campaign_record.html": _CAMPAIGN_RECORD,
}
