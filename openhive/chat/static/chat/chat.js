// OpenHive chat page: one WebSocket (/ws/chat/, authenticated by the session cookie), a topic
// sidebar, one thread per topic, live tool events and notifications. Plain JS, no build step.
"use strict";

(function () {
  const el = (id) => document.getElementById(id);
  const statusEl = el("status");
  const topicList = el("topic-list");
  const noTopics = el("no-topics");
  const thread = el("thread");
  const threadTitle = el("thread-title");
  const notes = el("notes");
  const form = el("composer");
  const input = el("message");

  let socket = null;
  let retryDelay = 1000;
  let topics = [];
  let current = null; // the selected topic id; null = the next message opens a new topic
  let forceNew = false; // the user pressed "New topic"
  let pendingNew = false; // a message without a topic was sent; show its topic when it answers
  let firstList = true; // on page load, open the most recent topic

  function setStatus(text, offline) {
    statusEl.textContent = text;
    statusEl.classList.toggle("offline", Boolean(offline));
  }

  function item(kind, meta, text) {
    const li = document.createElement("li");
    li.className = kind;
    if (meta) {
      const m = document.createElement("span");
      m.className = "meta";
      m.textContent = meta;
      li.appendChild(m);
    }
    li.appendChild(document.createTextNode(text));
    return li;
  }

  function show(kind, meta, text, topicId) {
    // Messages of other topics are not lost: they are in the history when that topic opens.
    if (topicId !== undefined && topicId !== null && topicId !== current) {
      markUnread(topicId);
      return;
    }
    thread.appendChild(item(kind, meta, text));
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

  async function selectTopic(id) {
    current = id;
    forceNew = false;
    const topic = topics.find((t) => t.id === id);
    threadTitle.textContent = topic ? topic.name : "Topic";
    renderTopics();
    thread.replaceChildren();
    await loadHistory(id);
    input.focus();
  }

  async function loadHistory(id) {
    if (id === null) return;
    const response = await fetch(`/chat/topics/${id}/messages/`, { credentials: "same-origin" });
    if (!response.ok || id !== current) return;
    const data = await response.json();
    thread.replaceChildren();
    for (const m of data.messages) {
      show(m.role === "user" ? "user" : "assistant", m.role === "user" ? "You" : "Main agent", m.content);
    }
  }

  function newTopic() {
    current = null;
    forceNew = true;
    threadTitle.textContent = "New topic";
    thread.replaceChildren();
    renderTopics();
    input.focus();
  }

  function handle(msg) {
    switch (msg.type) {
      case "topic_list":
        topics = msg.topics;
        renderTopics();
        if (firstList && current === null && !forceNew && !pendingNew && topics.length) {
          selectTopic(topics[0].id);
        }
        firstList = false;
        break;
      case "ack":
        break;
      case "event":
        show("event", "Tool", `${msg.event === "tool_call" ? "calling" : "finished"} ${msg.name}`, msg.topic_id);
        break;
      case "response":
        if (pendingNew && current === null) {
          pendingNew = false;
          selectTopic(msg.topic_id); // loads the thread, including this answer
          return;
        }
        show("assistant", `Main agent · ${msg.topic_name}`, msg.content, msg.topic_id);
        break;
      case "notification": {
        const meta = msg.team ? `From ${msg.team}` : "Notification";
        notes.appendChild(item("notification", meta, msg.content));
        show("notification", meta, msg.content, msg.topic_id);
        break;
      }
      case "error":
        if (msg.topic_id !== undefined && msg.topic_id !== null && msg.topic_id !== current) {
          markUnread(msg.topic_id);
        }
        notes.appendChild(item("error", "Error", msg.message || msg.code));
        if (msg.topic_id === undefined || msg.topic_id === current) show("error", "Error", msg.message || msg.code);
        break;
    }
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}/ws/chat/`);
    socket.addEventListener("open", () => {
      setStatus("Connected");
      retryDelay = 1000;
      // Answers that came while we were away are stored: reload the open thread.
      if (current !== null) loadHistory(current);
    });
    socket.addEventListener("message", (event) => {
      try {
        handle(JSON.parse(event.data));
      } catch (err) {
        console.error("bad frame", err);
      }
    });
    socket.addEventListener("close", () => {
      setStatus(`Disconnected; reconnecting in ${Math.round(retryDelay / 1000)} s…`, true);
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
    show("user", "You", content);
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
