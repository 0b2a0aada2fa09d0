"""What the live page adds to the report's page: a line saying whether it is live,
and a small script (in the package: nothing is fetched from elsewhere). The script
follows the server's event stream and puts each section it is sent in place; the
sections a burst of events changed are put in place once, on the next frame. The
browser reconnects by itself; the server then sends every section again."""

from __future__ import annotations

from html import escape

SCRIPT = """
<div id="live-bar" style="position:fixed;right:12px;bottom:8px;font-size:12px;
  background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:2px 8px">
<span id="live-state">connecting</span> <span id="live-said"></span></div>
<script>
(function () {
  var token = document.querySelector('meta[name="forge-token"]').content;
  var stream = document.querySelector('meta[name="forge-events"]').content;
  var state = document.getElementById("live-state");
  var pending = {}, queued = false;
  function flush() {
    queued = false;
    for (var name in pending) {
      var el = document.getElementById("s-" + name);
      if (el) { el.innerHTML = pending[name]; }
    }
    pending = {};
    document.body.setAttribute("data-version", window.forgeVersion);
  }
  var source = new EventSource(stream);
  source.addEventListener("sections", function (e) {
    var data = JSON.parse(e.data);
    for (var name in data.sections) { pending[name] = data.sections[name]; }
    window.forgeVersion = data.version;
    if (!queued) {
      queued = true;
      if (document.hidden) { setTimeout(flush, 200); } else { requestAnimationFrame(flush); }
    }
    state.textContent = "live";
  });
  source.onerror = function () { state.textContent = "reconnecting"; };
  document.addEventListener("click", function (e) {
    var b = e.target.closest("button[data-action]");
    if (!b) { return; }
    b.disabled = true;
    fetch(b.getAttribute("data-action"), {method: "POST", headers: {"X-Forge-Token": token}})
      .then(function (r) { return r.text(); })
      .then(function (t) { document.getElementById("live-said").textContent = t; })
      .finally(function () { b.disabled = false; });
  });
})();
</script>
"""


def live_extra(token: str, events: str) -> str:
    """The metadata the script reads, and the script."""
    return (
        f'<meta name="forge-token" content="{escape(token)}">'
        f'<meta name="forge-events" content="{escape(events)}">' + SCRIPT
    )
