// The search page of `vitreg serve --index`: one self-contained HTML file (no outside resources).
// window.vitregSearch is the hook the browser test drives: ready, idle(), results().
#include <string>

#include <nlohmann/json.hpp>

#include "search_routes.hpp"

namespace vitreg::cli {

namespace {

const char* const kPage = R"PAGE(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>@TITLE@</title><link rel="icon" href="data:,">
<style>
body { font: 14px system-ui, sans-serif; margin: 1.5em; background: #fafafa; color: #222; }
header { display: flex; gap: 1em; align-items: center; flex-wrap: wrap; }
#status { color: #555; } #status.error { color: #b00020; }
#query { font-weight: 600; }
#results { display: grid; grid-template-columns: repeat(auto-fill, minmax(170px, 1fr)); gap: 12px; margin-top: 1em; }
figure.hit { margin: 0; padding: 6px; background: #fff; border: 1px solid #ddd; border-radius: 6px; cursor: pointer; }
figure.hit:hover { border-color: #1a73e8; }
figure.hit img { width: 100%; height: 150px; object-fit: contain; background: #eee; display: block; }
figure.hit .none { height: 150px; display: flex; align-items: center; justify-content: center; background: #eee; color: #777; }
figcaption { font-size: 12px; margin-top: 4px; word-break: break-all; white-space: pre-line; }
</style></head><body>
<header><h1>@TITLE@</h1>
<label>Search with an image: <input type="file" id="upload" accept="image/*"></label>
<label>k <input type="number" id="k" min="1" max="100" value="@K@" style="width: 4em"></label>
<span id="status">upload an image, or click a result to search from it</span></header>
<div>query: <span id="query">none</span></div>
<div id="results"></div>
<script>
(() => {
  const results = document.getElementById('results'), status = document.getElementById('status');
  let pending = Promise.resolve(), shown = [];
  const say = (text, error) => { status.textContent = text; status.className = error ? 'error' : ''; };
  const k = () => Math.max(1, Math.min(100, Number(document.getElementById('k').value) || 10));
  function draw(answer) {
    document.getElementById('query').textContent = answer.query;
    results.replaceChildren();
    shown = answer.results;
    for (const hit of answer.results) {
      const fig = document.createElement('figure');
      fig.className = 'hit';
      fig.dataset.id = hit.id;
      const img = document.createElement('img');
      img.alt = hit.key;
      img.src = hit.thumb;
      img.addEventListener('error', () => {
        const none = document.createElement('div');
        none.className = 'none';
        none.textContent = 'no thumbnail';
        img.replaceWith(none);
      });
      const cap = document.createElement('figcaption');
      // The shard's file name and the sample's caption (KEY.txt); the whole path in the tooltip.
      const where = hit.shard ? ` · ${hit.shard.split('/').pop()}@${hit.offset}` : '';
      const caption = hit.metadata && typeof hit.metadata.caption === 'string' ? `\n${hit.metadata.caption}` : '';
      cap.textContent = `${hit.key} · ${hit.score.toFixed(4)}${where}${caption}`;
      fig.title = hit.shard ? `${hit.shard} at byte ${hit.offset}` : hit.key;
      fig.append(img, cap);
      fig.addEventListener('click', () => search(`api/search?id=${hit.id}&k=${k()}`, { method: 'GET' }, hit.key));
      results.append(fig);
    }
    say(`${answer.results.length} results`);
  }
  function search(url, init, label) {
    say(`searching with ${label}…`);
    pending = pending.then(async () => {
      try {
        const r = await fetch(url, init);
        const body = await r.json();
        if (!r.ok) { say(body.error || `error ${r.status}`, true); return; }
        draw(body);
      } catch (e) { say(String(e), true); }
    });
    return pending;
  }
  document.getElementById('upload').addEventListener('change', (ev) => {
    const file = ev.target.files[0];
    if (file) search(`api/search?k=${k()}`, { method: 'POST', body: file, headers: { 'X-Filename': encodeURIComponent(file.name) } }, file.name);
  });
  window.vitregSearch = { ready: true, idle: () => pending, results: () => shown };
})();
</script></body></html>
)PAGE";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
    for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) text.replace(at, from.size(), to);
    return text;
}

std::string html_escaped(const std::string& text) {
    std::string out;
    for (const char c : text) out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : c == '"' ? "&quot;" : std::string(1, c);
    return out;
}

}  // namespace

std::string search_page(const std::string& title, int k) {
    return replaced(replaced(kPage, "@TITLE@", html_escaped(title)), "@K@", std::to_string(k));
}

}  // namespace vitreg::cli
