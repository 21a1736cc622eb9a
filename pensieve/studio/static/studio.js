/* Pensieve studio: the few interactions the pages need. Everything that came from a model
   or a web page is put into the page with textContent, never as HTML. */
"use strict";

(function () {
  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else node.setAttribute(k, v);
    }
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  async function api(method, url, body) {
    const init = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(url, init);
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    return { status: response.status, ok: response.ok, data: data || {} };
  }

  function say(node, text, kind) {
    if (!node) return;
    node.textContent = text || "";
    node.className = "message" + (kind ? " " + kind : "");
  }

  const fmtCost = (v) => (v === null || v === undefined ? "-" : "$" + Number(v).toFixed(4));
  const fmtTokens = (n) => (n ? Number(n).toLocaleString("en-US") : "-");

  /* ---------------- projects ---------------- */
  function initProjects() {
    const table = $("#projects");
    if (!table) return;
    let sortKey = "updated_at", sortDir = -1, rows = null;
    function render() {
      if (!rows) return;
      const sorted = rows.slice().sort((a, b) => {
        const x = a[sortKey], y = b[sortKey];
        if (x === y) return 0;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * sortDir;
      });
      const body = el("tbody");
      for (const r of sorted) {
        const tr = el("tr", { "data-id": r.id });
        const td1 = el("td");
        td1.append(el("a", { href: "/projects/" + encodeURIComponent(r.id) }, r.title || r.id), el("div", { class: "sub" }, r.id));
        const td2 = el("td");
        td2.append(el("span", { class: "badge s-" + r.status }, r.status));
        if (r.problems) td2.append(" ", el("span", { class: "warn" }, r.problems + " problems"));
        const td3 = el("td", { "data-label": "Stage" }, (r.current_stage || "-") + " ");
        td3.append(el("span", { class: "sub" }, r.stages_done + "/10"));
        const share = r.supported_share === null || r.supported_share === undefined ? "-" : Math.round(r.supported_share * 100) + "%";
        tr.append(td1, td2, td3, el("td", { class: "num", "data-label": "Cost" }, fmtCost(r.cost_usd)),
          el("td", { class: "num", "data-label": "Supported" }, share),
          el("td", { "data-label": "Updated" }, (r.updated_at || "-").slice(0, 16).replace("T", " ")));
        body.append(tr);
      }
      table.tBodies[0].replaceWith(body);
    }
    $$("th[data-key]", table).forEach((th) => {
      th.tabIndex = 0;
      const sort = () => {
        const key = th.dataset.key;
        sortDir = key === sortKey ? -sortDir : 1;
        sortKey = key;
        $$("th", table).forEach((h) => h.removeAttribute("aria-sort"));
        th.setAttribute("aria-sort", sortDir > 0 ? "ascending" : "descending");
        if (!rows) refresh().then(render); else render();
      };
      th.addEventListener("click", sort);
      th.addEventListener("keydown", (e) => { if (e.key === "Enter") sort(); });
    });
    async function refresh() {
      const r = await api("GET", "/api/projects?detail=1");
      if (r.ok) { rows = r.data; render(); }
    }
    setInterval(refresh, 2000);
  }

  /* ---------------- new article ---------------- */
  function initNew() {
    const form = $("#new-form");
    if (!form) return;
    // A model belongs to a run (a project keeps none): without one, the choice is set aside.
    const start = $("#start"), model = $("#model");
    const followStart = () => { model.disabled = !start.checked; $("#model-note").hidden = start.checked; };
    start.addEventListener("change", followStart);
    followStart();
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const msg = $("#form-message");
      const body = { brief: $("#brief").value };
      const pid = $("#pid").value.trim();
      if (pid) body.id = pid;
      if ($("#words").value) body.target_words = Number($("#words").value);
      if ($("#audience").value.trim()) body.audience = $("#audience").value.trim();
      if (!model.disabled && model.value) body.model = model.value;
      body.start = $("#start").checked;
      say(msg, "Creating…");
      const r = await api("POST", "/api/projects", body);
      if (r.status === 201) {
        if (r.data.run && r.data.run.error) sessionStorage.setItem("pensieve-msg", r.data.run.error);
        location.href = "/projects/" + encodeURIComponent(r.data.id);
      } else {
        say(msg, r.data.error || "could not create the project (" + r.status + ")", "error");
      }
    });
  }

  /* ---------------- project page ---------------- */
  function describe(ev) {
    const d = ev;
    switch (d.kind) {
      case "stage_start": return "started (" + (d.model || "") + ", attempt " + (d.attempt || 1) + ")";
      case "stage_end": return "finished";
      case "stage_error": return "failed: " + (d.error || "");
      case "stage_interrupted": return "interrupted";
      case "model":
        if (d.error) return "model call failed: " + d.error;
      {
        const calls = Array.isArray(d.tool_calls) ? d.tool_calls.join(", ") : (d.tool_calls ? String(d.tool_calls) : "");
        const cost = d.cost_usd !== undefined && d.cost_usd !== null ? ", " + fmtCost(d.cost_usd) : "";
        return "model call" + (d.purpose ? " (" + d.purpose + ")" : "") + ": " +
          fmtTokens((d.prompt_tokens || 0) + (d.completion_tokens || 0) || d.tokens) + " tokens" + cost +
          (d.duration_s ? ", " + Number(d.duration_s).toFixed(1) + " s" : "") + (calls ? " → " + calls : "");
      }
      case "tool": {
        let args = d.arguments;
        if (args && typeof args === "object") args = JSON.stringify(args);
        return (d.tool || "tool") + "(" + (args || "") + ")" + (d.error ? " → error: " + d.error : "");
      }
      case "fetch": return "fetched " + (d.url || "") + (d.status ? " (" + d.status + ")" : "");
      case "web_search": return "searched: " + (d.query || "");
      case "retry": return "retrying: " + (d.error || "");
      case "repair": return "asked again (" + (d.reason || "") + ")";
      case "citation_check": return "citation check: " + (d.ok ? "ok" : (d.problem_count || 0) + " problem(s)");
      case "note": return d.message || "";
      case "run_end": return "run ended: " + (d.outcome || "") + (d.error ? " (" + d.error + ")" : "");
      default: return d.message || d.error || "";
    }
  }

  function initProject() {
    const id = document.body.dataset.project;
    const feed = $("#feed"), runMsg = $("#run-message");
    const stored = sessionStorage.getItem("pensieve-msg");
    if (stored) { say(runMsg, stored, "error"); sessionStorage.removeItem("pensieve-msg"); }
    let refreshTimer = null;
    let state = $("#state").textContent;

    function addEvent(data) {
      let ev;
      try { ev = JSON.parse(data); } catch (e) { return; }
      const kind = String(ev.kind || "event");
      const li = el("li", { class: "ev k-" + kind.replace(/[^a-z_]/g, "") });
      li.append(el("time", {}, String(ev.ts || "").slice(11, 19)), el("span", { class: "ev-stage" }, ev.stage || "run"),
        el("span", { class: "ev-kind" }, kind), el("span", { class: "ev-text" }, describe(ev)));
      feed.append(li);
      while (feed.children.length > 400) feed.firstElementChild.remove();
      const box = feed.parentElement;
      if (box.scrollHeight - box.scrollTop - box.clientHeight < 80 || feed.children.length < 3) box.scrollTop = box.scrollHeight;
      if (kind !== "tool") scheduleRefresh();
    }

    function scheduleRefresh() {
      if (refreshTimer) return;
      refreshTimer = setTimeout(() => { refreshTimer = null; refresh(); }, 150);
    }

    async function refresh() {
      const r = await api("GET", "/api/projects/" + encodeURIComponent(id) + "/view");
      if (!r.ok) return;
      const v = r.data;
      state = v.state;
      const badge = $("#state");
      badge.textContent = v.state;
      badge.className = "badge s-" + v.state;
      document.body.dataset.state = v.state;
      for (const [name, e] of Object.entries(v.status.stages)) {
        const li = $('li[data-stage="' + name + '"]');
        if (!li) continue;
        const stale = (v.stale_downstream || []).includes(name);
        li.className = "stage s-" + e.status + (stale ? " stale" : "");
        const st = $('[data-field="status"]', li);
        st.textContent = e.status;
        st.className = "badge s-" + e.status;
        const badge = $('[data-field="stale"]', li);
        badge.hidden = !stale;
        badge.title = v.stale[name] ? "changed since it ran: " + v.stale[name].join(", ") : (stale ? "runs again after an earlier stale stage" : "");
        const u = e.usage || {};
        const parts = [];
        if (e.model) parts.push(e.model);
        if (u.calls) parts.push(u.calls + " calls");
        if (u.prompt_tokens || u.completion_tokens) parts.push(fmtTokens(u.prompt_tokens + u.completion_tokens) + " tokens");
        if (u.cost_usd !== null && u.cost_usd !== undefined) parts.push(fmtCost(u.cost_usd));
        if (e.started_at && e.finished_at) parts.push(((Date.parse(e.finished_at) - Date.parse(e.started_at)) / 1000).toFixed(1) + " s");
        if (e.repairs && e.repairs.length) parts.push(e.repairs.length + " repair turn" + (e.repairs.length > 1 ? "s" : ""));
        if (e.violations && e.violations.length) parts.push(e.violations.length + " problems");
        $('[data-field="meta"]', li).textContent = parts.join(" · ");
        $('[data-field="error"]', li).textContent = e.error || "";
        const link = $('[data-field="artifact"]', li);
        if (link) link.hidden = !v.files.includes(link.textContent);
      }
      $("#stop-btn").disabled = !v.running_pid;
      $("#run-btn").disabled = !!v.running_pid;
      $$('button[data-action="rerun"]').forEach((b) => { b.disabled = !!v.running_pid; });
    }

    async function run(body) {
      say(runMsg, "Starting…");
      const model = $("#run-model");
      if (model && model.value) body.model = model.value;
      const r = await api("POST", "/api/projects/" + encodeURIComponent(id) + "/run", body);
      if (r.status === 202) say(runMsg, r.data.finished ? "Nothing left to run: " + r.data.finished : "Running (process " + r.data.pid + ").", "ok");
      else say(runMsg, r.data.error || "could not start (" + r.status + ")", "error");
      refresh();
    }

    $("#run-btn").addEventListener("click", () => {
      const until = $("#until").value;
      run(until ? { until } : {});
    });
    $("#stop-btn").addEventListener("click", async () => {
      const r = await api("POST", "/api/projects/" + encodeURIComponent(id) + "/stop");
      if (r.status === 202) say(runMsg, "Stopping: the stage in flight is marked interrupted; run again to resume.", "ok");
      else say(runMsg, r.data.error || "could not stop (" + r.status + ")", "error");
      refresh();
    });
    $$('button[data-action="rerun"]').forEach((b) => b.addEventListener("click", () => run({ from: b.dataset.stage })));

    const events = Number(document.body.dataset.events || 0);
    const since = Math.max(0, events - 150);
    const source = new EventSource("/api/projects/" + encodeURIComponent(id) + "/events?since=" + since);
    source.onopen = () => { $("#feed-state").textContent = "live"; };
    source.onerror = () => { $("#feed-state").textContent = "reconnecting"; };
    source.onmessage = (m) => addEvent(m.data);
    refresh();
    setInterval(() => { if (state === "running" || document.body.dataset.state === "running") refresh(); }, 1500);
    setInterval(refresh, 5000);
  }

  /* ---------------- file (edit) page ---------------- */
  function initFile() {
    const b = document.body.dataset;
    const form = $("#edit-form"), editor = $("#editor"), msg = $("#save-message");
    let base = b.sha;
    const url = "/api/projects/" + encodeURIComponent(b.project) + "/files/" + encodeURIComponent(b.file);
    function openEditor() { form.hidden = false; $("#rendered").hidden = true; $("#edit-btn").hidden = true; editor.focus(); }
    $("#edit-btn").addEventListener("click", openEditor);
    if (new URLSearchParams(location.search).get("edit") === "1") openEditor();
    $("#cancel-btn").addEventListener("click", () => location.reload());
    async function save(text, baseSha) {
      say(msg, "Saving…");
      const r = await api("PUT", url, { text, base_sha256: baseSha });
      if (r.ok) {
        base = r.data.sha256;
        $("#conflict").hidden = true;
        say(msg, r.data.changed ? "Saved. The previous version is kept under history/." : "No change.", "ok");
        const stale = r.data.stale_downstream || [];
        if (stale.length) {
          $("#after-save").hidden = false;
          $("#stale-text").textContent = "Out of date now: " + stale.join(", ") + ". Re-run them to use your edit.";
          $("#rerun-stage").textContent = stale[0];
          $("#rerun-btn").dataset.stage = stale[0];
        }
      } else if (r.status === 409 && r.data.current) {
        $("#conflict").hidden = false;
        $("#theirs").value = r.data.current.text;
        $("#yours").value = text;
        $("#keep-mine").dataset.sha = r.data.current.sha256;
        say(msg, r.data.error, "error");
      } else {
        say(msg, r.data.error || "could not save (" + r.status + ")", "error");
      }
    }
    form.addEventListener("submit", (e) => { e.preventDefault(); save(editor.value, base); });
    $("#keep-mine").addEventListener("click", () => save($("#yours").value, $("#keep-mine").dataset.sha));
    $("#take-theirs").addEventListener("click", () => { editor.value = $("#theirs").value; base = $("#keep-mine").dataset.sha; $("#conflict").hidden = true; say(msg, "Loaded the version on disk; edit and save."); });
    $("#rerun-btn").addEventListener("click", async () => {
      const r = await api("POST", "/api/projects/" + encodeURIComponent(b.project) + "/run", { from: $("#rerun-btn").dataset.stage });
      if (r.status === 202) location.href = "/projects/" + encodeURIComponent(b.project);
      else say(msg, r.data.error || "could not start (" + r.status + ")", "error");
    });
  }

  /* ---------------- read page ---------------- */
  function initRead() {
    $$("a.cite").forEach((a) => {
      const passage = a.nextElementSibling;
      if (!passage || !passage.classList.contains("passage")) return;
      a.setAttribute("aria-expanded", "false");
      a.addEventListener("click", (e) => {
        e.preventDefault();
        const open = !passage.classList.contains("open");
        passage.classList.toggle("open", open);
        a.setAttribute("aria-expanded", String(open));
      });
    });
  }

  /* ---------------- topics ---------------- */
  function initTopics() {
    const form = $("#topic-search");
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const q = $("#q").value.trim();
      const msg = $("#search-message"), hits = $("#hits");
      hits.textContent = "";
      if (!q) return;
      say(msg, "Searching (the first search loads the embedding model)…");
      const r = await api("GET", "/api/topics?q=" + encodeURIComponent(q));
      if (!r.ok) { say(msg, r.data.error || "search failed", "error"); return; }
      say(msg, r.data.hits.length ? r.data.hits.length + " topic(s)" : "Nothing close enough.");
      for (const h of r.data.hits) {
        const li = el("li");
        li.append(el("strong", {}, h.title), " ", el("span", { class: "sub" }, h.slug + " · " + Number(h.score).toFixed(2)), el("p", {}, h.snippet));
        hits.append(li);
      }
    });
  }

  /* ---------------- library ---------------- */
  function initLibrary() {
    const msg = $("#add-message");
    $("#library-search").addEventListener("submit", async (e) => {
      e.preventDefault();
      const q = $("#q").value.trim();
      const smsg = $("#search-message"), hits = $("#hits");
      hits.textContent = "";
      if (!q) return;
      say(smsg, "Searching (the first search loads the embedding model)…");
      const r = await api("GET", "/api/library?q=" + encodeURIComponent(q));
      if (!r.ok) { say(smsg, r.data.error || "search failed", "error"); return; }
      say(smsg, r.data.hits.length ? r.data.hits.length + " passage(s)" : "Nothing matches.");
      for (const h of r.data.hits) {
        const li = el("li");
        li.append(el("strong", {}, h.title), " ", el("span", { class: "sub" }, h.id + (h.page ? " · p. " + h.page : "")), el("p", {}, h.passage));
        hits.append(li);
      }
    });
    $("#library-upload").addEventListener("submit", async (e) => {
      e.preventDefault();
      const files = Array.from($("#file").files || []);
      if (!files.length) { say(msg, "Choose one or more files first.", "error"); return; }
      const tags = $("#tags").value.trim();
      const lines = [];
      for (const file of files) {
        say(msg, "Adding " + file.name + "…");
        const url = "/api/library/upload?name=" + encodeURIComponent(file.name) + (tags ? "&tags=" + encodeURIComponent(tags) : "");
        const response = await fetch(url, { method: "POST", body: file, credentials: "same-origin", headers: { "Content-Type": "application/octet-stream", Accept: "application/json" } });
        let data = {};
        try { data = await response.json(); } catch (err) { data = {}; }
        lines.push(response.ok ? (data.new ? "added " : "already in the library: ") + data.id + " (" + data.title + ")" : "error: " + (data.error || response.status));
      }
      say(msg, lines.join("; "), lines.some((l) => l.startsWith("error")) ? "error" : "");
      if (lines.some((l) => !l.startsWith("error"))) setTimeout(() => window.location.reload(), 600);
    });
    $("#library-url").addEventListener("submit", async (e) => {
      e.preventDefault();
      const url = $("#url").value.trim();
      if (!url) return;
      say(msg, "Fetching " + url + "…");
      const r = await api("POST", "/api/library/url", { url });
      if (!r.ok) { say(msg, r.data.error || "the fetch failed", "error"); return; }
      say(msg, (r.data.new ? "added " : "already in the library: ") + r.data.id + " (" + r.data.title + ")");
      setTimeout(() => window.location.reload(), 600);
    });
  }

  const inits = { projects: initProjects, new: initNew, project: initProject, file: initFile, read: initRead, topics: initTopics, library: initLibrary };
  document.addEventListener("DOMContentLoaded", () => {
    const init = inits[document.body.dataset.page];
    if (init) init();
  });
})();
