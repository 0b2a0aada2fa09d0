"""The frame of `forge report`'s page: inline CSS, system fonts, nothing fetched."""

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0;
  color: #1f2328; background: #f6f8fa; }}
header, section {{ background: #fff; margin: 12px; padding: 12px 16px;
  border: 1px solid #d0d7de; border-radius: 6px; }}
h1 {{ font-size: 20px; margin: 0 0 8px; }}
h2 {{ font-size: 16px; margin: 0 0 8px; }}
.verdict {{ font-size: 13px; padding: 2px 8px; border-radius: 10px; color: #fff;
  vertical-align: middle; }}
.verdict.v-pass {{ background: #2e9d5b; }}
.verdict.v-fail {{ background: #d9534f; }}
.verdict.v-none {{ background: #8d96a0; }}
.verdict.v-mixed {{ background: #bf8700; }}
.facts th {{ text-align: left; padding-right: 16px; font-weight: 600; color: #57606a; }}
.scroll {{ overflow: auto; max-height: 70vh; }}
.note {{ color: #57606a; margin: 0 0 6px; }}
svg.gantt {{ width: 100%; height: auto; min-width: 700px; }}
svg text {{ font: 12px system-ui, sans-serif; }}
svg .node text {{ fill: #fff; font-weight: 600; }}
svg .wave, svg .axis {{ fill: #57606a; }}
svg .edge {{ fill: none; stroke: #8c959f; stroke-width: 1.2; }}
svg .tick {{ stroke: #eaeef2; }}
svg .lane {{ fill: #1f2328; }}
svg .bar {{ fill: #fff; font-size: 10px; }}
svg a:hover rect {{ opacity: .8; }}
.legend {{ margin-top: 6px; }}
.key {{ margin-right: 14px; white-space: nowrap; }}
.swatch, .dot {{ display: inline-block; width: 10px; height: 10px; border-radius: 2px;
  margin-right: 4px; vertical-align: baseline; }}
table.tasks {{ border-collapse: collapse; width: 100%; }}
table.tasks th, table.tasks td {{ border-top: 1px solid #eaeef2; padding: 4px 8px;
  text-align: left; vertical-align: top; }}
table.tasks tr.first td {{ border-top: 1px solid #d0d7de; }}
table.tasks tr:target td {{ background: #fff8c5; }}
.title, .reason {{ color: #57606a; font-size: 12px; }}
.reason {{ max-width: 480px; overflow-wrap: anywhere; }}
.none {{ color: #8c959f; }}
</style>
</head>
<body>
{body}
</body>
</html>
"""
