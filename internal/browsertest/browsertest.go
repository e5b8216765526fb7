// Package browsertest serves what the tests of boxd's browser need, on
// loopback: the pages the browser opens, and a stand-in for the model
// providers (the Anthropic Messages API and the OpenAI chat completions
// API) that answers the AI operations from the page and the instruction
// in the prompt, as a model would, and records what it was asked.
package browsertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Installed reports whether Chromium is installed here.
func Installed() bool {
	for _, p := range []string{"/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if _, err := exec.LookPath(p); err == nil {
			return true
		}
	}
	return false
}

// Page is the main test page: text, two links, a button and an input that
// change the page, and a block wider and taller than the viewport. Once
// loaded it writes its scroll size into its text as "size WxH".
const Page = `<!doctype html>
<html><head><meta charset="utf-8"><title>Fixture page</title></head>
<body style="margin:0; font-family: sans-serif">
<h1>Hello from the fixture</h1>
<p>The answer is 42 apples.</p>
<a href="/second">Second page</a>
<a href="/third">Third page</a>
<button id="add" onclick="document.getElementById('count').textContent = String(++window.clicks)">Add item</button>
<span>Items: <span id="count">0</span></span>
<input id="name" placeholder="Your name" oninput="document.getElementById('echo').textContent = 'Hi ' + this.value">
<div id="echo"></div>
<div id="size" style="height: 20px"></div>
<div style="width: 1500px; height: 2600px; background: linear-gradient(#c00, #00c)">tall and wide</div>
<script>
window.clicks = 0;
addEventListener('load', () => {
	const d = document.documentElement;
	document.getElementById('size').textContent = 'size ' + d.scrollWidth + 'x' + d.scrollHeight;
});
</script>
</body></html>`

// SizeRE finds the scroll size Page reports.
var SizeRE = regexp.MustCompile(`size (\d+)x(\d+)`)

// NewSite serves the test pages on the host's loopback and returns their
// base URL as a box sees it: http://host.boxd.internal:{port}, through the
// box's egress proxy. Paths: / (Page), /second, /third, /animated (a
// page that changes 20 times a second) and /confirm (a button that asks
// "Delete it?" and shows the answer).
func NewSite(t testing.TB) string {
	t.Helper()
	html := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, body)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", html(Page))
	mux.HandleFunc("/second", html(`<!doctype html><title>Second page</title><p>You reached the second page.</p><a href="/">Back home</a>`))
	mux.HandleFunc("/third", html(`<!doctype html><title>Third page</title><p>Third.</p>`))
	mux.HandleFunc("/confirm", html(`<!doctype html><title>Confirm</title>
<button id="del" onclick="document.getElementById('answer').textContent = 'answer ' + confirm('Delete it?')">Delete</button>
<div id="answer"></div>`))
	mux.HandleFunc("/animated", html(`<!doctype html><title>Animated</title>
<body style="margin:0"><div id="b" style="width:200px;height:200px;background:#08f;position:absolute"></div>
<div id="t" style="position:absolute;top:300px;font:40px sans-serif"></div>
<script>let i = 0; setInterval(() => { i++; const b = document.getElementById('b');
b.style.left = (i * 7 % 1000) + 'px'; b.style.top = (i * 3 % 400) + 'px';
document.getElementById('t').textContent = 'frame ' + i; }, 50);</script></body>`))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	_, port, _ := net.SplitHostPort(ts.Listener.Addr().String())
	return "http://host.boxd.internal:" + port
}

// Models is the stand-in for the model providers. Set its URL as boxd's
// ModelProviderURLs["anthropic"], and URL+"/v1" as ["openai"].
type Models struct {
	URL string

	mu    sync.Mutex
	calls []Call
}

// Call is one request the stand-in answered.
type Call struct {
	API    string // "anthropic" or "openai"
	Key    string
	Model  string
	Prompt string
}

// BadKey is a key the stand-in refuses with 401.
const BadKey = "sk-ant-bad"

// Calls returns the requests so far.
func (m *Models) Calls() []Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Call(nil), m.calls...)
}

var elementLine = regexp.MustCompile(`(?m)^\[(\d+)\] (.*)$`)

// elementWith returns the number the prompt gave the element whose line
// contains s, or -1.
func elementWith(prompt, s string) int {
	for _, m := range elementLine.FindAllStringSubmatch(prompt, -1) {
		if strings.Contains(m[2], s) {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	return -1
}

// Instructions the stand-in understands, on Page:
//
//   - observe "the add buttons": the Add item button (plus an element
//     that is not on the page, which boxd must drop);
//   - act "Type Grace into the name field": fill the name input;
//   - extract "the fruit and how many": {"fruit": "apples", "count": 42}
//     in a code fence, when the prompt has the page's text;
//   - extract "count the pears": an answer that does not match the schema.
//
// Anything else gets an empty answer.
func answer(prompt string) string {
	switch {
	case strings.Contains(prompt, "Task: list the elements that match this instruction"):
		if !strings.Contains(prompt, "the add buttons") {
			return `{"elements": []}`
		}
		n := elementWith(prompt, `"Add item"`)
		return fmt.Sprintf(`{"elements": [{"element": %d, "description": "Add item button", "method": "click", "arguments": []}, {"element": 999, "description": "hallucinated"}]}`, n)
	case strings.Contains(prompt, "Task: choose the one action"):
		if strings.Contains(prompt, "Type Grace into the name field") {
			n := elementWith(prompt, `placeholder="Your name"`)
			return fmt.Sprintf("Here you go:\n{\"elements\": [{\"element\": %d, \"description\": \"name field\", \"method\": \"fill\", \"arguments\": [\"Grace\"]}]}", n)
		}
		return `{"elements": []}`
	case strings.Contains(prompt, "matches this JSON schema"):
		if strings.Contains(prompt, "Task: count the pears") {
			return `{"fruit": 7}`
		}
		if strings.Contains(prompt, "The answer is 42 apples.") && strings.Contains(prompt, "Task: the fruit and how many") {
			return "```json\n{\"fruit\": \"apples\", \"count\": 42}\n```"
		}
		return `{}`
	}
	return "I do not understand."
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// NewModels starts the stand-in.
func NewModels(t testing.TB) *Models {
	m := &Models{}
	record := func(c Call) {
		m.mu.Lock()
		m.calls = append(m.calls, c)
		m.mu.Unlock()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model     string    `json:"model"`
			MaxTokens int       `json:"max_tokens"`
			System    string    `json:"system"`
			Messages  []message `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) != 1 || req.Messages[0].Role != "user" ||
			req.MaxTokens == 0 || r.Header.Get("anthropic-version") == "" {
			w.WriteHeader(400)
			io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"malformed request"}}`)
			return
		}
		key := r.Header.Get("x-api-key")
		prompt := req.Messages[0].Content
		record(Call{API: "anthropic", Key: key, Model: req.Model, Prompt: prompt})
		if key == BadKey {
			w.WriteHeader(401)
			io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
			return
		}
		text := answer(prompt)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"type": "message", "role": "assistant", "model": req.Model,
			"content": []map[string]any{{"type": "text", "text": text}},
			"usage":   map[string]any{"input_tokens": len(prompt) / 4, "output_tokens": len(text) / 4},
		})
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string    `json:"model"`
			Messages []message `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) != 2 || req.Messages[1].Role != "user" {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"message":"malformed request"}}`)
			return
		}
		prompt := req.Messages[1].Content
		record(Call{API: "openai", Key: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), Model: req.Model, Prompt: prompt})
		text := answer(prompt)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"choices": []map[string]any{{"index": 0, "message": map[string]any{"role": "assistant", "content": text}}},
			"usage":   map[string]any{"prompt_tokens": len(prompt) / 4, "completion_tokens": len(text) / 4},
		})
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	m.URL = ts.URL
	return m
}
