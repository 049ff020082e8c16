// OpenHive chat page: one WebSocket (/ws/chat/, authenticated by the session cookie), a topic
// sidebar, one thread per topic, live tool events and what teams send (results, notifications,
// escalations). Plain JS, no build step.
//
// The server stores everything the thread shows: messages and deliveries in the topic's
// history, tool calls in the audit. A reload or a reconnect rebuilds the thread from
// /chat/topics/<id>/messages/; live frames that are already in it (same message id) are skipped.
"use strict";

(function () {
  const el = (id) => document.getElementById(id);
  const statusEl = el("status");
  const topicList = el("topic-list");
  const noTopics = el("no-topics");
  const thread = el("thread");
  const threadTitle = el("thread-title");
  const notes = el("notes");
  const noNotes = el("no-notes");
  const form = el("composer");
  const input = el("message");

  const DELIVERY_LABELS = { result: "Result", notification: "Notification", escalation: "Escalation" };

  let socket = null;
  let retryDelay = 1000;
  let topics = [];
  let current = null; // the selected topic id; null = the next message opens a new topic
  let forceNew = false; // the user pressed "New topic"
  let pendingNew = false; // a message without a topic was sent; adopt the topic it lands in
  let firstList = true; // on page load, open the most recent topic
  let deliveries = []; // what teams sent, newest last: the notifications panel's source
  const shown = new Set(); // ids of stored messages in the thread (no duplicates on reconnect)

  function setStatus(text, offline) {
    statusEl.textContent = text;
    statusEl.classList.toggle("offline", Boolean(offline));
  }

  function clock(at) {
    const when = at ? new Date(at) : new Date();
    const t = document.createElement("time");
    t.dateTime = when.toISOString();
    t.textContent = when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
    t.title = when.toLocaleString();
    return t;
  }

  // One thread or panel entry: a meta line (who, what, when) and the text.
  function item(kind, meta, text, at, extra) {
    const li = document.createElement("li");
    li.className = kind;
    const m = document.createElement("span");
    m.className = "meta";
    for (const part of [].concat(meta)) {
      if (part) m.append(part);
    }
    m.append(clock(at));
    li.appendChild(m);
    if (text) {
      const body = document.createElement("span");
      body.className = "body";
      body.textContent = text;
      li.appendChild(body);
    }
    if (extra) li.appendChild(extra);
    return li;
  }

  function append(li, topicId) {
    // Entries of other topics are not lost: they are in the history when that topic opens.
    if (topicId !== undefined && topicId !== null && topicId !== current) {
      markUnread(topicId);
      return;
    }
    thread.appendChild(li);
    thread.scrollTop = thread.scrollHeight;
  }

  function markUnread(topicId) {
    const button = topicList.querySelector(`button[data-id="${topicId}"]`);
    if (button && !button.dataset.unread) {
      button.dataset.unread = "1";
      button.append(" •");
      button.setAttribute("aria-label", button.textContent + " (new messages)");
    }
  }

  // A tool event: "calling x", "x finished", or "x failed" with the tool's error.
  function toolItem(name, phase, error, at) {
    if (phase === "failed") {
      const li = item("event failed", "Tool failed", `${name} failed: ${error || "no error given"}`, at);
      li.setAttribute("role", "note");
      return li;
    }
    return item("event", "Tool", phase === "calling" ? `calling ${name}` : `${name} finished`, at);
  }

  // The task a delivery belongs to: "task #12 · done", linked to the admin for staff.
  function taskLabel(d) {
    if (d.task_id === null || d.task_id === undefined) return null;
    const text = `task #${d.task_id}` + (d.task_status ? ` · ${d.task_status}` : "");
    if (d.task_url) {
      const a = document.createElement("a");
      a.href = d.task_url;
      a.textContent = text;
      a.title = "Open the task in the admin";
      return a;
    }
    const s = document.createElement("span");
    s.className = "task";
    s.textContent = text;
    return s;
  }

  function deliveryItem(d) {
    const li = item(`delivery ${d.role}`, metaOf(d), d.content, d.created_at);
    if (d.id !== undefined && d.id !== null) li.dataset.messageId = String(d.id);
    return li;
  }

  function messageItem(m) {
    if (m.role === "user") return item("user", "You", m.content, m.created_at);
    if (m.role === "assistant") return item("assistant", "Main agent", m.content, m.created_at);
    return deliveryItem(m);
  }

  // The notifications panel: what teams sent outside the open topic (another topic, or none).
  function renderNotes() {
    notes.replaceChildren();
    const visible = deliveries.filter((d) => d.topic_id === null || d.topic_id !== current);
    for (const d of visible.slice(-30)) {
      let link = null;
      if (d.topic_id !== null && d.topic_id !== undefined) {
        link = document.createElement("button");
        link.type = "button";
        link.className = "link";
        link.textContent = `in ${d.topic_name || "topic " + d.topic_id}`;
        link.addEventListener("click", () => selectTopic(d.topic_id));
      }
      notes.appendChild(item(`delivery ${d.role}`, metaOf(d), d.content, d.created_at, link));
    }
    noNotes.hidden = visible.length > 0;
  }

  function metaOf(d) {
    const label = DELIVERY_LABELS[d.role] || "Notification";
    return [d.team ? `${label} from ${d.team}` : label, taskLabel(d)];
  }

  function remember(d) {
    if (d.id !== null && deliveries.some((x) => x.id === d.id)) return false;
    deliveries.push(d);
    return true;
  }

  function renderTopics() {
    topicList.replaceChildren();
    noTopics.hidden = topics.length > 0;
    for (const t of topics) {
      const li = document.createElement("li");
      const b = document.createElement("button");
      b.type = "button";
      b.dataset.id = String(t.id);
      b.textContent = t.name;
      const state = document.createElement("span");
      state.className = "state";
      state.textContent = t.state === "active" ? "" : `(${t.state})`;
      b.appendChild(state);
      if (t.id === current) b.setAttribute("aria-current", "true");
      b.addEventListener("click", () => selectTopic(t.id));
      li.appendChild(b);
      topicList.appendChild(li);
    }
  }

  function setTitle() {
    const topic = topics.find((t) => t.id === current);
    threadTitle.textContent = topic ? topic.name : current === null ? "New topic" : "Topic";
  }

  async function selectTopic(id) {
    current = id;
    forceNew = false;
    setTitle();
    renderTopics();
    renderNotes();
    thread.replaceChildren();
    shown.clear();
    await loadHistory(id);
    input.focus();
  }

  async function loadHistory(id) {
    if (id === null) return;
    const response = await fetch(`/chat/topics/${id}/messages/`, { credentials: "same-origin" });
    if (!response.ok || id !== current) return;
    const data = await response.json();
    // Messages and tool calls, merged by time (a message first when they tie).
    const entries = data.messages.map((m) => ({ at: micros(m.created_at), order: 0, m }));
    for (const e of data.events || []) entries.push({ at: micros(e.created_at), order: 1, e });
    entries.sort((a, b) => a.at - b.at || a.order - b.order);
    thread.replaceChildren();
    shown.clear();
    for (const entry of entries) {
      if (entry.m) {
        shown.add(entry.m.id);
        thread.appendChild(messageItem(entry.m));
      } else {
        const e = entry.e;
        thread.appendChild(toolItem(e.name, e.success ? "finished" : "failed", e.error, e.created_at));
      }
    }
    thread.scrollTop = thread.scrollHeight;
  }

  // An ISO time to microseconds since the epoch (Date keeps only milliseconds).
  function micros(iso) {
    const fraction = /\.(\d+)/.exec(iso);
    const extra = fraction ? Number((fraction[1] + "000000").slice(3, 6)) : 0;
    return Date.parse(iso) * 1000 + extra;
  }

  async function loadNotifications() {
    const response = await fetch("/chat/notifications/", { credentials: "same-origin" });
    if (!response.ok) return;
    deliveries = (await response.json()).notifications;
    renderNotes();
  }

  function newTopic() {
    current = null;
    forceNew = true;
    threadTitle.textContent = "New topic";
    thread.replaceChildren();
    shown.clear();
    renderTopics();
    renderNotes();
    input.focus();
  }

  // The first frame of a new topic's first turn says where the message landed: show that
  // topic without reloading (the user's message and the events so far are already shown).
  function adopt(topicId) {
    if (!pendingNew || current !== null || topicId === undefined || topicId === null) return;
    pendingNew = false;
    forceNew = false;
    current = topicId;
    setTitle();
    renderTopics();
    renderNotes();
  }

  function handle(msg) {
    switch (msg.type) {
      case "topic_list":
        topics = msg.topics;
        renderTopics();
        setTitle();
        if (firstList && current === null && !forceNew && !pendingNew && topics.length) {
          selectTopic(topics[0].id);
        }
        firstList = false;
        break;
      case "ack":
        break;
      case "event": {
        adopt(msg.topic_id);
        let phase = "calling";
        if (msg.event === "tool_result") phase = msg.success === false ? "failed" : "finished";
        append(toolItem(msg.name, phase, msg.error, msg.at), msg.topic_id);
        break;
      }
      case "delta":
        adopt(msg.topic_id);
        break;
      case "response":
        adopt(msg.topic_id);
        append(item("assistant", "Main agent", msg.content, msg.at), msg.topic_id);
        break;
      case "notification": {
        const d = {
          id: msg.message_id ?? null,
          role: msg.kind || "notification",
          team: msg.team,
          content: msg.content,
          task_id: msg.task_id ?? null,
          task_status: msg.task_status || "",
          task_url: msg.task_url || "",
          topic_id: msg.topic_id ?? null,
          topic_name: msg.topic_name || "",
          created_at: msg.at,
        };
        const isNew = remember(d);
        if (d.topic_id !== null && d.topic_id === current) {
          if (d.id === null || !shown.has(d.id)) {
            if (d.id !== null) shown.add(d.id);
            append(deliveryItem(d), d.topic_id);
          }
        } else if (isNew) {
          if (d.topic_id !== null) markUnread(d.topic_id);
          renderNotes();
        }
        break;
      }
      case "error": {
        adopt(msg.topic_id);
        const text = msg.message || msg.code;
        if (msg.topic_id === undefined || msg.topic_id === null || msg.topic_id === current) {
          append(item("error", "Error", text, msg.at));
        } else {
          markUnread(msg.topic_id);
        }
        break;
      }
    }
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}/ws/chat/`);
    socket.addEventListener("open", () => {
      setStatus("Connected");
      retryDelay = 1000;
      // What came while we were away is stored: reload the open thread and the panel.
      loadNotifications();
      if (current !== null) loadHistory(current);
    });
    socket.addEventListener("message", (event) => {
      try {
        handle(JSON.parse(event.data));
      } catch (err) {
        console.error("bad frame", err);
      }
    });
    socket.addEventListener("close", (event) => {
      const why = event.reason ? ` (${event.reason})` : "";
      setStatus(`Disconnected${why}; reconnecting in ${Math.round(retryDelay / 1000)} s…`, true);
      setTimeout(connect, retryDelay);
      retryDelay = Math.min(retryDelay * 2, 15000);
    });
  }

  function send() {
    const content = input.value.trim();
    if (!content) return;
    if (!socket || socket.readyState !== WebSocket.OPEN) {
      setStatus("Not connected; your message was not sent.", true);
      return;
    }
    const frame = { type: "message", content: content, topic_id: current };
    if (current === null && forceNew) frame.new_topic = true;
    if (current === null) pendingNew = true;
    socket.send(JSON.stringify(frame));
    append(item("user", "You", content));
    input.value = "";
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      send();
    }
  });
  el("new-topic").addEventListener("click", newTopic);
  connect();
})();
