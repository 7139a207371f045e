// The HTML report's style sheet (inline in the page: the report has no external resources).
#pragma once

namespace strata::rules::report {

inline constexpr const char* kCss = R"(
:root{--fg:#1f2933;--muted:#6b7280;--line:#e3e6ea;--bg:#fff;--band:#f6f7f9;--accent:#2f6fb0}
*{box-sizing:border-box}
body{margin:0;font:14px/1.5 -apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);background:var(--band)}
header{background:#1f3b57;color:#fff;padding:22px 32px 18px}
header h1{margin:0;font-size:22px;font-weight:600}
header .sub{opacity:.8;font-size:13px;margin-top:4px}
nav{background:#fff;border-bottom:1px solid var(--line);padding:8px 32px;position:sticky;top:0;z-index:2}
nav a{color:var(--accent);text-decoration:none;margin-right:18px;font-size:13px}
main{max-width:1040px;margin:0 auto;padding:8px 24px 40px}
section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:6px 24px 18px;margin:18px 0}
h2{font-size:18px;margin:16px 0 8px;font-weight:600}
h3{font-size:15px;margin:20px 0 6px;font-weight:600}
p{margin:6px 0}
.muted{color:var(--muted)}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:10px 0 4px}
.card{flex:1 1 140px;background:var(--band);border:1px solid var(--line);border-radius:6px;padding:8px 12px}
.card .k{font-size:12px;color:var(--muted)}
.card .v{font-size:18px;font-weight:600}
table{border-collapse:collapse;width:100%;margin:8px 0;font-size:13px}
th,td{border-bottom:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top}
th{background:var(--band);font-weight:600;white-space:nowrap}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code,.params{font:12px/1.4 ui-monospace,Menlo,Consolas,monospace}
.params{white-space:pre;color:#374151}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;white-space:nowrap}
.IssuesFound{background:#fde8e4;color:#a2331f}
.NoIssuesFound{background:#e3f4e8;color:#23713d}
.Error{background:#5c1a14;color:#fff}
.NoData{background:#eceef1;color:#4b5563;border:1px dashed #9aa3ad}
.InProgress{background:#e2edf8;color:#2f6fb0}
.rule{border-top:1px solid var(--line);padding-top:4px;margin-top:14px}
.rec{background:#f3f7fc;border-left:3px solid var(--accent);padding:6px 10px;margin:8px 0}
.note-red{color:#a2331f;font-size:13px;margin:0 0 12px}
.warn{background:#fff6e5;border-left:3px solid #e0a030;padding:6px 10px;margin:8px 0}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:4px 18px}
svg.chart{display:block;max-width:100%;height:auto;margin:6px 0 10px}
svg .grid{stroke:#edf0f3;stroke-width:1}
svg .frame{fill:none;stroke:#cfd5dc}
svg text{font-family:-apple-system,"Segoe UI",Roboto,Arial,sans-serif;fill:#4b5563}
svg .tick{font-size:11px}
svg .axis{font-size:11.5px;fill:#374151}
svg .label{font-size:12px;fill:#1f2933}
svg .value{font-size:11px;fill:#4b5563}
svg .legend{font-size:11.5px}
svg .note{font-size:11px;fill:#a2331f}
svg .inbar{font-size:11px;fill:#fff;font-weight:600}
footer{color:var(--muted);font-size:12px;text-align:center;padding:12px}
)";

}  // namespace strata::rules::report
