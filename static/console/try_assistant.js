// "Try the assistant" (templates/console/evals/try.html): the chat continues the
// conversation its last reply was in; "New conversation" starts over; Ctrl+Enter sends.
(function () {
  const form = document.getElementById("try-form");
  if (!form) return;
  const log = document.getElementById("try-log");
  const conversation = form.querySelector("input[name=conversation]");
  const box = form.querySelector("textarea[name=question]");
  form.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.elt !== form || !event.detail.successful) return;
    const replies = log.querySelectorAll(".try-reply[data-conversation]");
    if (replies.length) conversation.value = replies[replies.length - 1].dataset.conversation;
    box.value = "";
    box.focus();
    log.scrollTop = log.scrollHeight;
  });
  box.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  document.getElementById("try-new").addEventListener("click", function () {
    conversation.value = "";
    log.replaceChildren();
    box.focus();
  });
})();
