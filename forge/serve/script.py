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
  function same(a, b) {
    if (a.nodeType !== b.nodeType || a.nodeName !== b.nodeName) { return false; }
    if (a.nodeType !== 1) { return true; }
    if (a.attributes.length !== b.attributes.length) { return false; }
    for (var i = 0; i < a.attributes.length; i++) {
      var at = a.attributes[i];
      if (b.getAttribute(at.name) !== at.value) { return false; }
    }
    return a.childNodes.length === b.childNodes.length;
  }
  // Only what changed is replaced: the browser lays out a row, not the whole table.
  function patch(old, neu) {
    var o = old.childNodes, n = neu.childNodes;
    for (var i = n.length - 1; i >= 0; i--) {
      if (o[i].isEqualNode(n[i])) { continue; }
      if (same(o[i], n[i]) && o[i].nodeType === 1) { patch(o[i], n[i]); }
      else { old.replaceChild(n[i], o[i]); }
    }
  }
  function flush() {
    var t0 = performance.now();
    queued = false;
    for (var name in pending) {
      var el = document.getElementById("s-" + name);
      if (!el) { continue; }
      var fresh = document.createElement("div");
      fresh.innerHTML = pending[name];
      if (fresh.childNodes.length === el.childNodes.length) { patch(el, fresh); }
      else { el.replaceChildren.apply(el, Array.prototype.slice.call(fresh.childNodes)); }
    }
    pending = {};
    document.body.setAttribute("data-version", window.forgeVersion);
    window.forgeApplyMs = performance.now() - t0;  // (what one update costs the page)
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
