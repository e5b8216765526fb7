package desktop

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/agent"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/store"
	"github.com/upstash/box-go/local/internal/wire"
)

// The computer-use model calls: Anthropic's Messages API with its
// computer tool, fed the desktop's screenshots.
const (
	defaultComputerModel = "claude-sonnet-4-5"
	computerTool         = "computer_20250124"
	computerBeta         = "computer-use-2025-01-24"
	anthropicURL         = "https://api.anthropic.com"
	// maxModelAnswer bounds a model's answer.
	maxModelAnswer = 8 << 20
	defaultSteps   = 12
	maxSteps       = 30
)

// computer is one conversation with a computer-use model about a w×h
// screen.
type computer struct {
	url, key, model string
	w, h            int
	client          *http.Client
	messages        []any
	in, out         int64
}

// computer returns a conversation for box b with the requested model (or
// Claude Sonnet 4.5): the key is the box's agent_api_key when it is an
// Anthropic key, else ANTHROPIC_API_KEY in the box's env.
func (ds *Desktops) computer(b *store.Box, s *session, requested string) (*computer, error) {
	model := requested
	if p, id, ok := strings.Cut(model, "/"); ok {
		if p != "anthropic" {
			return nil, errdefs.Invalid("model %q: the desktop's agent runs Anthropic's computer-use models", model)
		}
		model = id
	}
	if model == "" {
		model = defaultComputerModel
	}
	key := ""
	if k := b.AgentAPIKey; strings.HasPrefix(k, "sk-ant-") || (k != "" && strings.HasPrefix(b.Model, "anthropic/") && k != "UPSTASH_KEY" && k != "STORED_KEY") {
		key = k
	}
	if key == "" {
		key = b.EnvVars["ANTHROPIC_API_KEY"]
	}
	if key == "" {
		return nil, errdefs.Invalid("the desktop's agent needs an Anthropic key: create the box with agent_api_key set to one, or set ANTHROPIC_API_KEY in the box's env")
	}
	base := anthropicURL
	if u := ds.cfg.ProviderURLs["anthropic"]; u != "" {
		base = u
	}
	return &computer{url: strings.TrimRight(base, "/") + "/v1/messages", key: key, model: model, w: s.width, h: s.height, client: &http.Client{Timeout: 5 * time.Minute}}, nil
}

// toolUse is a call of the computer tool.
type toolUse struct {
	ID    string         `json:"id"`
	Name  string         `json:"name"`
	Input map[string]any `json:"input"`
}

// reply is a model's turn.
type reply struct {
	text   string
	uses   []toolUse
	stop   string
	blocks []json.RawMessage
}

func imageBlock(png []byte) map[string]any {
	return map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": base64.StdEncoding.EncodeToString(png)}}
}

// turn sends the conversation and adds the model's answer to it.
func (c *computer) turn(ctx context.Context) (*reply, error) {
	body := map[string]any{
		"model":      c.model,
		"max_tokens": 4096,
		"system":     "You operate a Linux desktop through the computer tool. Act on the user's request; when it is done, say so briefly without calling the tool.",
		"tools":      []any{map[string]any{"type": computerTool, "name": "computer", "display_width_px": c.w, "display_height_px": c.h, "display_number": 1}},
		"messages":   c.messages,
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", c.key)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("anthropic-beta", computerBeta)
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, errdefs.Upstream("anthropic: %v", errorWithoutURL(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxModelAnswer+1))
	if err != nil {
		return nil, errdefs.Upstream("anthropic: reading the answer: %v", err)
	}
	if len(data) > maxModelAnswer {
		return nil, errdefs.Upstream("anthropic: the answer is over %d bytes", maxModelAnswer)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		msg := e.Error.Message
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return nil, errdefs.Upstream("anthropic answered %d: %s", resp.StatusCode, msg)
	}
	var res struct {
		Content []json.RawMessage `json:"content"`
		Usage   struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, errdefs.Upstream("anthropic: the answer is not a message: %v", err)
	}
	c.in += res.Usage.InputTokens
	c.out += res.Usage.OutputTokens
	r := &reply{}
	var text []string
	for _, raw := range res.Content {
		var b struct {
			Type string `json:"type"`
			Text string `json:"text"`
			toolUse
		}
		if json.Unmarshal(raw, &b) != nil {
			continue
		}
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "tool_use":
			r.uses = append(r.uses, b.toolUse)
		}
	}
	r.text = strings.Join(text, "\n")
	c.messages = append(c.messages, map[string]any{"role": "assistant", "content": res.Content})
	return r, nil
}

// errorWithoutURL keeps a transport error's cause and drops the URL,
// which names the operator's provider address.
func errorWithoutURL(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}

// action turns a call of the computer tool into the action it asks for.
func (u toolUse) action() gen.ComputerUseAction {
	a := gen.ComputerUseAction{AdditionalProperties: map[string]any{}}
	for k, v := range u.Input {
		if k == "action" {
			a.Type, _ = v.(string)
			continue
		}
		a.AdditionalProperties[k] = v
	}
	return a
}

// perform does what the model's calls ask, and answers each with a tool
// result: a screenshot action's is its image; the last one also carries
// a screenshot of the screen after them all.
func (ds *Desktops) performCalls(ctx context.Context, rt *agent.Client, s *session, c *computer, uses []toolUse) ([]gen.ComputerUseAction, error) {
	var actions []gen.ComputerUseAction
	var results []any
	for _, u := range uses {
		a := u.action()
		actions = append(actions, a)
		res := map[string]any{"type": "tool_result", "tool_use_id": u.ID}
		if u.Name != "computer" {
			res["is_error"], res["content"] = true, "unknown tool "+u.Name
			results = append(results, res)
			continue
		}
		data, err := act(ctx, rt, s, a)
		switch {
		case err != nil:
			res["is_error"], res["content"] = true, err.Error()
		case a.Type == "screenshot":
			png, _ := base64.StdEncoding.DecodeString(data.(string))
			res["content"] = []any{imageBlock(png)}
		case data != nil:
			raw, _ := json.Marshal(data)
			res["content"] = string(raw)
		default:
			res["content"] = "done"
		}
		results = append(results, res)
	}
	if n := len(results); n > 0 {
		if last := results[n-1].(map[string]any); last["is_error"] == nil {
			png, err := screenshot(ctx, rt, true)
			if err != nil {
				return nil, err
			}
			content, _ := last["content"].([]any)
			if text, ok := last["content"].(string); ok {
				content = []any{map[string]any{"type": "text", "text": text}}
			}
			last["content"] = append(content, imageBlock(png))
		}
	}
	c.messages = append(c.messages, map[string]any{"role": "user", "content": results})
	return actions, nil
}

// conversation is a computer-use model's talk about a running desktop.
type conversation struct {
	*computer
	box *store.Box
	rt  *agent.Client
	s   *session
	// first is the screenshot the model saw with the request.
	first []byte
}

// converse begins a conversation about box id's desktop: the request
// text with a screenshot. done ends the box's busy mark.
func (ds *Desktops) converse(ctx context.Context, id, model, text string) (*conversation, func(), error) {
	b, rt, s, err := ds.on(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	c, err := ds.computer(b, s, model)
	if err != nil {
		return nil, nil, err
	}
	done := ds.host.Busy(b.ID)
	png, err := screenshot(ctx, rt, true)
	if err != nil {
		done()
		return nil, nil, err
	}
	c.messages = []any{map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "text", "text": text}, imageBlock(png),
	}}}
	return &conversation{computer: c, box: b, rt: rt, s: s, first: png}, done, nil
}

// DesktopAgentAct shows a computer-use model the screen and the
// instruction, performs the actions it answers with, and returns them.
func (ds *Desktops) DesktopAgentAct(ctx context.Context, req gen.DesktopAgentActRequestObject) (gen.DesktopAgentActResponseObject, error) {
	if req.Body == nil || strings.TrimSpace(req.Body.Instruction) == "" {
		return nil, errdefs.Invalid("instruction is required")
	}
	cv, done, err := ds.converse(ctx, req.ID, wire.Deref(req.Body.Model), req.Body.Instruction)
	if err != nil {
		return nil, err
	}
	defer done()
	b, rt, s, c, png := cv.box, cv.rt, cv.s, cv.computer, cv.first
	r, err := c.turn(ctx)
	if err != nil {
		return nil, err
	}
	actions, err := ds.performCalls(ctx, rt, s, c, r.uses)
	if err != nil {
		return nil, err
	}
	ds.host.Logf(b.ID, "info", "system", fmt.Sprintf("desktop agent acted: %d actions, %d input and %d output tokens", len(actions), c.in, c.out))
	return gen.DesktopAgentAct200JSONResponse{
		Actions: actions, Reasoning: wire.NonEmpty(r.text),
		Screenshot:  &gen.DesktopAgentScreenshot{Data: png},
		InputTokens: &c.in, OutputTokens: &c.out,
	}, nil
}

// DesktopAgentRun lets a computer-use model drive the desktop until it
// says it is done or max_steps model turns have passed.
func (ds *Desktops) DesktopAgentRun(ctx context.Context, req gen.DesktopAgentRunRequestObject) (gen.DesktopAgentRunResponseObject, error) {
	if req.Body == nil || strings.TrimSpace(req.Body.Prompt) == "" {
		return nil, errdefs.Invalid("prompt is required")
	}
	steps := wire.DerefOr(req.Body.MaxSteps, defaultSteps)
	if steps < 1 || steps > maxSteps {
		return nil, errdefs.Invalid("max_steps must be 1 to %d, got %d", maxSteps, steps)
	}
	cv, done, err := ds.converse(ctx, req.ID, wire.Deref(req.Body.Model), req.Body.Prompt)
	if err != nil {
		return nil, err
	}
	defer done()
	b, rt, s, c := cv.box, cv.rt, cv.s, cv.computer
	out := gen.DesktopAgentRun200JSONResponse{Completed: wire.Ptr(false)}
	var result string
	for step := 1; step <= steps; step++ {
		r, err := c.turn(ctx)
		if err != nil {
			return nil, err
		}
		result = r.text
		if len(r.uses) == 0 {
			out.Steps = append(out.Steps, gen.DesktopAgentStep{Step: step, Reasoning: wire.NonEmpty(r.text)})
			out.Completed = wire.Ptr(true)
			break
		}
		actions, err := ds.performCalls(ctx, rt, s, c, r.uses)
		if err != nil {
			return nil, err
		}
		out.Steps = append(out.Steps, gen.DesktopAgentStep{Step: step, Reasoning: wire.NonEmpty(r.text), Actions: actions})
	}
	out.Result = wire.NonEmpty(result)
	out.StepCount = wire.Ptr(len(out.Steps))
	out.InputTokens, out.OutputTokens = &c.in, &c.out
	ds.host.Logf(b.ID, "info", "system", fmt.Sprintf("desktop agent ran %d steps, %d input and %d output tokens", len(out.Steps), c.in, c.out))
	return out, nil
}
