// Stapel's page: a client of /v1 like any other. The API key lives in this tab's
// sessionStorage and travels only in the Authorization header; no cookie, no key in
// a URL. Polling is bounded: one list read per tick, plus a progress read per job
// that still moves (finished jobs are read once; at most 10 a tick), ticks 2 s
// apart while something runs and 10 s when nothing does, none while the tab is
// hidden, and a 429 waits for its Retry-After.
"use strict";

(function () {
  const KEY = "stapel.key";
  const FAST_MS = 2000;
  const SLOW_MS = 10000;
  const PAGE = 20;
  const READS_PER_TICK = 10;
  const USAGE_MS = 30000;
  const PREVIEW = 200; // segments shown per document in the preview
  // A score under this is highlighted when the job routes nothing to review: the middle
  // of the thresholds docs/quality.md measures.
  const LOW_SCORE = 0.5;
  const ACTIVE = new Set(["queued", "running"]);
  const MESSAGES = {
    unauthorized: "This API key was not accepted. Check it, or ask for a new one.",
    rate_limited: "Too many requests for your account just now; the page waits and retries.",
    quota_segments_per_day: "Your daily allowance of segments is used up.",
    quota_jobs_in_flight: "You have as many jobs running as allowed; wait for some to end.",
    unsupported_file_type: "A file is of a type that cannot be translated.",
    invalid_document: "A file could not be read in its format.",
    invalid_encoding: "A text file is not UTF-8.",
    too_many_documents: "Too many files for one job.",
    too_many_segments: "The files hold more text than one job may.",
    document_too_large: "A file is too large.",
    request_entity_too_large: "The upload is larger than the server accepts.",
    segment_too_long: "A line or paragraph is too long.",
    unknown_language_pair: "That language pair is not offered.",
    no_segments: "Choose at least one file.",
    job_finished: "The job had already ended.",
    not_found: "No such job.",
    database_unavailable: "The service is busy or down; try again in a moment.",
    broker_unavailable: "The service is busy or down; try again in a moment.",
    submission_busy: "The service is busy; try again in a moment.",
    network: "The server could not be reached.",
  };

  const $ = (id) => document.getElementById(id);
  const state = {
    key: null,
    jobs: new Map(), // id -> {job, docs, node, final}
    order: [],
    cursor: null,
    timer: null,
    busy: false,
    again: false,
    generation: 0, // bumped at each sign-in and sign-out: late answers are dropped
    waitUntil: 0,
    usageAt: 0,
    files: [],
    memories: [], // the tenant's memories, read at sign-in
  };

  class ApiError extends Error {
    constructor(status, code, message, retryAfter) {
      super(message);
      this.status = status;
      this.code = code;
      this.retryAfter = retryAfter;
    }
    get readable() {
      const hint = MESSAGES[this.code];
      return hint
        ? `${hint} ${this.message} (code: ${this.code})`
        : `${this.message} (code: ${this.code})`;
    }
  }

  async function api(path, options = {}) {
    const headers = Object.assign({}, options.headers, {
      Authorization: `Bearer ${state.key}`,
    });
    let response;
    try {
      response = await fetch(path, Object.assign({}, options, {
        headers, credentials: "omit", cache: "no-store", redirect: "error",
      }));
    } catch (err) {
      throw new ApiError(0, "network", String(err.message || err), 0);
    }
    if (!response.ok) {
      let code = "error";
      let message = `HTTP ${response.status}`;
      try {
        const body = await response.json();
        code = body.error.code;
        message = body.error.message;
      } catch (_err) { /* not the API's JSON error */ }
      const retry = parseInt(response.headers.get("Retry-After") || "0", 10) || 0;
      if (response.status === 429) state.waitUntil = Date.now() + Math.max(retry, 1) * 1000;
      if (response.status === 401 && state.key) signOut(MESSAGES.unauthorized);
      throw new ApiError(response.status, code, message, retry);
    }
    return response;
  }

  function show(el, text) {
    el.textContent = text || "";
  }

  // --- signing in and out ---------------------------------------------------------
  async function signIn(key) {
    state.generation += 1;
    state.key = key;
    const response = await api("/v1/languages");
    const pairs = (await response.json()).pairs;
    sessionStorage.setItem(KEY, key);
    const select = $("pair");
    select.replaceChildren();
    for (const p of pairs) {
      const option = document.createElement("option");
      option.value = p.pair;
      option.textContent = `${p.source} → ${p.target}`;
      select.append(option);
    }
    await loadMemories();
    $("signin").hidden = true;
    $("workspace").hidden = false;
    $("logout").hidden = false;
    $("files").focus();
    refresh();
  }

  // The tenant's memories of the chosen pair, to name in a job.
  async function loadMemories() {
    const response = await api("/v1/memories");
    state.memories = (await response.json()).memories;
    showMemories();
  }

  function showMemories() {
    const [source, target] = $("pair").value.split("-");
    const select = $("memories");
    select.replaceChildren();
    for (const m of state.memories || []) {
      if (m.source_lang !== source || m.target_lang !== target) continue;
      const option = document.createElement("option");
      option.value = m.id;
      option.textContent = `${m.name || m.id.slice(0, 8)} (${m.entries} entries)`;
      select.append(option);
    }
    $("memory-options").hidden = select.options.length === 0;
  }

  function signOut(reason) {
    state.generation += 1;
    sessionStorage.removeItem(KEY);
    state.key = null;
    clearTimeout(state.timer);
    state.timer = null;
    state.jobs.clear();
    state.order = [];
    state.files = [];
    $("job-list").replaceChildren();
    $("file-list").replaceChildren();
    show($("usage"), "");
    state.usageAt = 0;
    $("workspace").hidden = true;
    $("logout").hidden = true;
    $("signin").hidden = false;
    $("api-key").value = "";
    show($("signin-error"), reason || "");
    $("api-key").focus();
  }

  $("signin-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = $("api-key").value.trim();
    show($("signin-error"), "");
    if (!key) {
      show($("signin-error"), "Enter your API key.");
      return;
    }
    try {
      await signIn(key);
    } catch (err) {
      state.key = null;
      sessionStorage.removeItem(KEY);
      show($("signin-error"), err.readable || String(err));
    }
  });
  $("logout").addEventListener("click", () => signOut("You are logged out."));

  // --- choosing files -------------------------------------------------------------
  function addFiles(list) {
    for (const file of list) state.files.push(file);
    renderFiles();
  }

  function renderFiles() {
    const ul = $("file-list");
    ul.replaceChildren();
    state.files.forEach((file, i) => {
      const li = document.createElement("li");
      li.textContent = `${file.name} (${formatBytes(file.size)}) `;
      const remove = document.createElement("button");
      remove.type = "button";
      remove.textContent = "Remove";
      remove.setAttribute("aria-label", `Remove ${file.name}`);
      remove.addEventListener("click", () => {
        state.files.splice(i, 1);
        renderFiles();
      });
      li.append(remove);
      ul.append(li);
    });
  }

  $("files").addEventListener("change", (event) => {
    addFiles(event.target.files);
    event.target.value = "";
  });
  const drop = $("drop");
  drop.addEventListener("dragover", (event) => {
    event.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (event) => {
    event.preventDefault();
    drop.classList.remove("over");
    addFiles(event.dataTransfer.files);
  });

  $("pair").addEventListener("change", showMemories);

  // --- submitting: one multipart POST /v1/jobs ------------------------------------
  $("job-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    show($("send-error"), "");
    if (!state.files.length) {
      show($("send-error"), MESSAGES.no_segments);
      return;
    }
    const [source, target] = $("pair").value.split("-");
    const form = new FormData();
    form.append("source_lang", source);
    form.append("target_lang", target);
    form.append("priority", $("priority").value);
    form.append("split_sentences", $("split_sentences").checked ? "true" : "false");
    form.append("cache", $("cache").checked ? "true" : "false");
    const memories = [...$("memories").selectedOptions].map((o) => o.value);
    if (memories.length) form.append("memories", memories.join(","));
    // document options apply to the files after them in the body: send them first
    form.append("overwrite_targets", $("overwrite_targets").checked ? "true" : "false");
    form.append("mark_fuzzy", $("mark_fuzzy").checked ? "true" : "false");
    if ($("min_score").value !== "") form.append("min_score", $("min_score").value);
    for (const file of state.files) form.append("files", file, file.name);
    const button = $("submit");
    button.disabled = true;
    show($("send-status"), "Uploading…");
    try {
      const response = await api("/v1/jobs", { method: "POST", body: form });
      const job = await response.json();
      state.files = [];
      renderFiles();
      state.usageAt = 0;
      show($("send-status"), `Job ${job.id.slice(0, 8)} accepted: ${job.segments_total} segments.`);
      refresh();
    } catch (err) {
      show($("send-status"), "");
      show($("send-error"), err.readable || String(err));
    } finally {
      button.disabled = false;
    }
  });

  // --- the job list, polled -------------------------------------------------------
  function schedule() {
    clearTimeout(state.timer);
    if (!state.key) return;
    const moving = [...state.jobs.values()].some((e) => ACTIVE.has(e.job.status));
    const held = state.waitUntil - Date.now();
    const wait = Math.max(moving ? FAST_MS : SLOW_MS, held);
    if (held > 0) {
      show($("poll-state"), `Rate limit reached: next update in ${Math.ceil(held / 1000)} s.`);
    } else {
      show($("poll-state"), moving ? "Updating every 2 seconds." : "Updating every 10 seconds.");
    }
    state.timer = setTimeout(refresh, wait);
  }

  // One refresh at a time: a call while one runs asks for another right after it.
  async function refresh() {
    clearTimeout(state.timer);
    if (!state.key) return;
    if (state.busy) {
      state.again = true;
      return;
    }
    if (document.hidden) {
      state.timer = setTimeout(refresh, SLOW_MS);
      return;
    }
    const generation = state.generation;
    state.busy = true;
    try {
      const response = await api(`/v1/jobs?limit=${PAGE}`);
      const body = await response.json();
      if (generation !== state.generation) return; // signed out meanwhile
      merge(body.jobs, state.order.length <= PAGE ? body.next_cursor : state.cursor, true);
      await readProgress(generation);
      if (Date.now() - state.usageAt > USAGE_MS) await readUsage();
      show($("jobs-error"), "");
    } catch (err) {
      if (state.key) show($("jobs-error"), err.readable || String(err));
    } finally {
      state.busy = false;
    }
    if (state.again || generation !== state.generation) {
      state.again = false;
      refresh(); // asked for meanwhile, or signed in again: read afresh
      return;
    }
    schedule();
  }

  // The tenant's quotas: jobs in flight and segments today, read every 30 s at most.
  async function readUsage() {
    state.usageAt = Date.now();
    const usage = await (await api("/v1/usage")).json();
    const of = (n, limit) => (limit === null ? `${n}` : `${n} of ${limit}`);
    show($("usage"), `Jobs in flight: ${of(usage.jobs_in_flight, usage.jobs_in_flight_limit)}` +
      ` · segments today: ${of(usage.segments_today, usage.segments_limit)}`);
  }

  // At most READS_PER_TICK progress reads per tick, the longest unread first.
  async function readProgress(generation) {
    const due = [...state.jobs.values()]
      .filter((e) => !(e.final && e.docs))
      .sort((a, b) => (a.readAt || 0) - (b.readAt || 0))
      .slice(0, READS_PER_TICK);
    for (const entry of due) {
      entry.readAt = Date.now();
      try {
        const response = await api(`/v1/jobs/${encodeURIComponent(entry.job.id)}/documents`);
        const docs = await response.json();
        if (generation !== state.generation) return;
        entry.docs = docs;
        entry.final = !ACTIVE.has(entry.docs.status);
        entry.job = Object.assign({}, entry.job, {
          status: entry.docs.status, segments_done: entry.docs.segments_done,
        });
        render(entry);
      } catch (err) {
        if (err.status === 429 || err.status === 401) throw err;
        show(entry.node.querySelector(".action-error"), err.readable || String(err));
      }
    }
  }

  function merge(jobs, cursor, atTop) {
    const fresh = [];
    for (const job of jobs) {
      let entry = state.jobs.get(job.id);
      if (!entry) {
        entry = { job, docs: null, final: false, node: build(job) };
        state.jobs.set(job.id, entry);
        fresh.push(job.id);
      }
      if (entry.job.status !== job.status) entry.final = false;
      entry.job = job;
      render(entry);
    }
    if (atTop) {
      const known = state.order.filter((id) => !fresh.includes(id));
      state.order = fresh.concat(known);
    } else {
      state.order = state.order.concat(fresh);
    }
    const list = $("job-list");
    for (const id of state.order) list.append(state.jobs.get(id).node);
    state.cursor = cursor;
    $("more").hidden = !cursor;
    $("jobs-empty").hidden = state.order.length > 0;
  }

  $("more").addEventListener("click", async () => {
    if (!state.cursor) return;
    try {
      const response = await api(`/v1/jobs?limit=${PAGE}&cursor=${encodeURIComponent(state.cursor)}`);
      const body = await response.json();
      merge(body.jobs, body.next_cursor, false);
      await readProgress(state.generation);
    } catch (err) {
      show($("jobs-error"), err.readable || String(err));
    }
  });

  function build(job) {
    const node = $("job-template").content.firstElementChild.cloneNode(true);
    node.dataset.jobId = job.id;
    node.querySelector(".cancel").addEventListener("click", () => cancel(job.id));
    node.querySelector(".download-all").addEventListener("click", () =>
      download(job.id, `/v1/jobs/${encodeURIComponent(job.id)}/result?format=file`, node));
    node.querySelector(".partial").addEventListener("click", () => preview(job.id, node));
    return node;
  }

  function render(entry) {
    const { job, docs, node } = entry;
    node.dataset.status = job.status;
    const title = node.querySelector(".job-title");
    const names = docs ? docs.documents.map((d) => d.name || `document ${d.index + 1}`) : [];
    title.textContent = names.length ? names.join(", ") : `Job ${job.id.slice(0, 8)}`;
    const badge = node.querySelector(".badge");
    badge.textContent = job.status;
    badge.className = `badge ${job.status}`;
    const bar = node.querySelector(".job-progress");
    bar.max = Math.max(job.segments_total, 1);
    bar.value = job.segments_done;
    const percent = Math.floor((100 * job.segments_done) / Math.max(job.segments_total, 1));
    bar.setAttribute("aria-label", `Job progress: ${percent}%`);
    bar.dataset.percent = String(percent);
    const pace = docs && docs.status === job.status ? docs.pace : null;
    node.querySelector(".job-numbers").textContent =
      `${job.segments_done} of ${job.segments_total} segments (${percent}%)${paceText(pace)}`;
    node.querySelector(".job-meta").textContent = [
      `${job.source_lang} → ${job.target_lang}`,
      `priority ${job.priority}`,
      `${job.documents_total} document${job.documents_total === 1 ? "" : "s"}`,
      `attempts ${job.attempts}`,
      job.segments_failed ? `${job.segments_failed} segments failed` : null,
      `created ${new Date(job.created_at).toLocaleString()}`,
      `id ${job.id}`,
    ].filter(Boolean).join(" · ");
    // Counts by origin: a human memory, the MT cache, the model.
    const origins = node.querySelector(".job-origins");
    const fromMemory = job.segments_from_memory || 0;
    const fromCache = job.segments_from_cache || 0;
    const fromMt = job.segments_from_mt || 0;
    origins.hidden = fromMemory + fromCache + fromMt === 0;
    origins.textContent = `Segments from: memory ${fromMemory} · cache ${fromCache}` +
      ` · machine translation ${fromMt}` +
      (job.min_score != null ? ` · for review ${job.segments_review || 0}` +
        ` (score under ${job.min_score})` : "");
    // The job's machine translations by score (GET /v1/jobs/<id>/documents).
    const scores = node.querySelector(".job-scores");
    const below = docs && docs.scores ? Object.entries(docs.scores.below) : [];
    scores.hidden = !below.some(([, n]) => n > 0);
    scores.textContent = "Machine translations scored under " +
      below.map(([bound, n]) => `${bound}: ${n}`).join(" · ");
    show(node.querySelector(".job-error"), job.error ? `Error: ${job.error}` : "");
    node.querySelector(".cancel").hidden = !ACTIVE.has(job.status);
    node.querySelector(".download-all").textContent =
      job.documents_total > 1 ? "Download all (zip)" : "Download";
    node.querySelector(".download-all").hidden = job.status === "failed";
    node.querySelector(".partial").textContent =
      ACTIVE.has(job.status) ? "Show result so far" : "Show result";
    if (docs) renderDocuments(entry);
  }

  function paceText(pace) {
    if (!pace || !pace.rate_per_s) return "";
    let text = ` · ${pace.rate_per_s.toFixed(1)} segments/s`;
    if (pace.remaining_s !== null) text += ` · about ${duration(pace.remaining_s)} left`;
    return text;
  }

  function renderDocuments(entry) {
    const { job, docs, node } = entry;
    const ul = node.querySelector(".documents");
    const rate = docs.pace && docs.pace.rate_per_s;
    ul.replaceChildren();
    for (const d of docs.documents) {
      const li = document.createElement("li");
      li.className = "document";
      const name = d.name || `document ${d.index + 1}`;
      const label = document.createElement("span");
      label.className = "doc-name";
      label.textContent = `${name} (${d.format})`;
      const bar = document.createElement("progress");
      bar.className = "doc-progress";
      bar.max = Math.max(d.segments_total, 1);
      bar.value = d.segments_done;
      const percent = Math.floor((100 * d.segments_done) / Math.max(d.segments_total, 1));
      bar.dataset.percent = String(percent);
      bar.setAttribute("aria-label", `${name}: ${percent}%`);
      const numbers = document.createElement("span");
      numbers.className = "doc-numbers";
      let text = `${d.segments_done} of ${d.segments_total}`;
      if (d.segments_failed) text += `, ${d.segments_failed} failed`;
      if (ACTIVE.has(job.status) && rate && d.segments_done < d.segments_total) {
        text += ` · about ${duration((d.segments_total - d.segments_done) / rate)} left`;
      }
      numbers.textContent = text;
      const get = document.createElement("button");
      get.type = "button";
      get.className = "download-doc";
      get.textContent = d.segments_done >= d.segments_total ? "Download" : "Download so far";
      get.setAttribute("aria-label", `Download ${name}`);
      get.addEventListener("click", () => download(job.id, d.links.file, node));
      li.append(label, bar, numbers, get);
      ul.append(li);
    }
  }

  async function cancel(id) {
    const entry = state.jobs.get(id);
    const error = entry.node.querySelector(".action-error");
    show(error, "");
    try {
      const response = await api(`/v1/jobs/${encodeURIComponent(id)}/cancel`, { method: "POST" });
      entry.job = await response.json();
      entry.final = false;
      render(entry);
    } catch (err) {
      show(error, err.readable || String(err));
    }
    refresh();
  }

  async function download(id, path, node) {
    const error = node.querySelector(".action-error");
    show(error, "");
    try {
      const response = await api(path);
      const blob = await response.blob();
      const name = filename(response.headers.get("Content-Disposition")) || `${id}.bin`;
      const url = URL.createObjectURL(blob);
      const a = document.createElement("a");
      a.href = url;
      a.download = name;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 30000);
    } catch (err) {
      show(error, err.readable || String(err));
    }
  }

  // A segment's score on its line: a title with the figure, a class when it is low or
  // was sent to review (its target is then empty or the source).
  function markScore(li, mark, low) {
    if (!mark || mark.score == null) return;
    li.dataset.score = mark.score.toFixed(2);
    li.title = `score ${mark.score.toFixed(2)}`;
    if (mark.review) {
      li.classList.add("review");
      li.title += ", to review";
    } else if (mark.score < low) {
      li.classList.add("low-score");
    }
  }

  // The document's counts over all its segments, not only the ones shown.
  function scoreCounts(marks, low, minScore) {
    const scored = marks.filter((m) => m && m.score != null);
    const p = document.createElement("p");
    p.className = "help score-counts";
    const under = scored.filter((m) => m.score < low).length;
    const review = scored.filter((m) => m.review).length;
    p.textContent = `${under} of ${scored.length} scored segments under ${low}` +
      (minScore != null ? ` · ${review} for review` : "");
    p.hidden = scored.length === 0;
    return p;
  }

  async function preview(id, node) {
    const box = node.querySelector(".preview");
    const error = node.querySelector(".action-error");
    show(error, "");
    try {
      const response = await api(`/v1/jobs/${encodeURIComponent(id)}/result`);
      const body = await response.json();
      const entry = state.jobs.get(id);
      const minScore = entry && entry.job.min_score != null ? entry.job.min_score : null;
      const low = minScore != null ? minScore : LOW_SCORE;
      box.replaceChildren();
      const note = document.createElement("p");
      note.className = "help";
      note.textContent = body.complete
        ? "The finished translation:"
        : `Translated so far (${body.segments_done} of ${body.segments_total}); untranslated segments are marked —.`;
      box.append(note);
      for (const doc of body.documents) {
        const h = document.createElement("h4");
        h.textContent = doc.id || "document";
        const ol = document.createElement("ol");
        ol.className = "segments";
        const marks = doc.provenance || [];
        doc.segments.slice(0, PREVIEW).forEach((target, i) => {
          const li = document.createElement("li");
          li.textContent = target === null ? "—" : target;
          markScore(li, marks[i], low);
          ol.append(li);
        });
        box.append(h, scoreCounts(marks, low, minScore), ol);
        if (doc.errors && doc.errors.length) {
          const failed = document.createElement("ul");
          failed.className = "error";
          for (const e of doc.errors) {
            const li = document.createElement("li");
            li.textContent = `Segment ${e.segment + 1} failed: ${e.message} (${e.code})`;
            failed.append(li);
          }
          box.append(failed);
        }
        if (doc.segments.length > PREVIEW) {
          const more = document.createElement("p");
          more.className = "help";
          more.textContent = `The first ${PREVIEW} of ${doc.segments.length} segments; download the file for all.`;
          box.append(more);
        }
      }
      box.hidden = false;
    } catch (err) {
      show(error, err.readable || String(err));
    }
  }

  // --- small helpers ---------------------------------------------------------------
  function filename(disposition) {
    if (!disposition) return null;
    const star = /filename\*=UTF-8''([^;]+)/i.exec(disposition);
    if (star) return decodeURIComponent(star[1]);
    const plain = /filename="?([^";]+)"?/i.exec(disposition);
    return plain ? plain[1] : null;
  }

  function duration(seconds) {
    if (seconds < 60) return `${Math.max(1, Math.round(seconds))} s`;
    if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
    return `${(seconds / 3600).toFixed(1)} h`;
  }

  function formatBytes(n) {
    if (n < 1024) return `${n} B`;
    if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
    return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  }

  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && state.key) refresh();
  });

  const saved = sessionStorage.getItem(KEY);
  if (saved) {
    signIn(saved).catch((err) => signOut(err.readable || String(err)));
  } else {
    $("api-key").focus();
  }
})();
