package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Provider is a model provider: it completes one prompt.
type Provider interface {
	// Name is the provider's name, e.g. "anthropic".
	Name() string
	Complete(ctx context.Context, req Completion) (*Answer, error)
}

// Completion is one request to a model: a system prompt and one user
// message.
type Completion struct {
	Model     string
	System    string
	Prompt    string
	MaxTokens int
}

// Answer is a model's reply with its token usage.
type Answer struct {
	Text         string
	InputTokens  int64
	OutputTokens int64
}

// ProviderError is a provider's refusal or failure.
type ProviderError struct {
	Provider string
	Status   int // HTTP status, 0 when there was no response
	Message  string
}

func (e *ProviderError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("%s: %s", e.Provider, e.Message)
	}
	return fmt.Sprintf("%s answered %d: %s", e.Provider, e.Status, e.Message)
}

// maxAnswer bounds a provider's response body.
const maxAnswer = 8 << 20

// Anthropic speaks the Anthropic Messages API (POST {base}/v1/messages).
type Anthropic struct {
	BaseURL string // e.g. https://api.anthropic.com
	Key     string
	Client  *http.Client
}

func (a *Anthropic) Name() string { return "anthropic" }

func (a *Anthropic) Complete(ctx context.Context, req Completion) (*Answer, error) {
	if req.MaxTokens <= 0 {
		req.MaxTokens = 4096
	}
	body := map[string]any{
		"model":      req.Model,
		"max_tokens": req.MaxTokens,
		"system":     req.System,
		"messages":   []map[string]any{{"role": "user", "content": req.Prompt}},
	}
	h := http.Header{}
	h.Set("x-api-key", a.Key)
	h.Set("anthropic-version", "2023-06-01")
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Usage struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := post(ctx, a.Client, a.Name(), strings.TrimRight(a.BaseURL, "/")+"/v1/messages", h, body, &res); err != nil {
		return nil, err
	}
	var text strings.Builder
	for _, c := range res.Content {
		if c.Type == "text" {
			text.WriteString(c.Text)
		}
	}
	return &Answer{Text: text.String(), InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens}, nil
}

// OpenAI speaks the OpenAI chat completions API (POST
// {base}/chat/completions), which OpenRouter, the Vercel AI Gateway and
// many local servers speak too.
type OpenAI struct {
	Provider string // its name in errors, e.g. "openai"
	BaseURL  string // e.g. https://api.openai.com/v1
	Key      string
	Client   *http.Client
}

func (o *OpenAI) Name() string { return o.Provider }

func (o *OpenAI) Complete(ctx context.Context, req Completion) (*Answer, error) {
	body := map[string]any{
		"model": req.Model,
		"messages": []map[string]any{
			{"role": "system", "content": req.System},
			{"role": "user", "content": req.Prompt},
		},
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+o.Key)
	var res struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := post(ctx, o.Client, o.Name(), strings.TrimRight(o.BaseURL, "/")+"/chat/completions", h, body, &res); err != nil {
		return nil, err
	}
	if len(res.Choices) == 0 {
		return nil, &ProviderError{Provider: o.Name(), Status: http.StatusOK, Message: "the answer has no choices"}
	}
	return &Answer{Text: res.Choices[0].Message.Content, InputTokens: res.Usage.PromptTokens, OutputTokens: res.Usage.CompletionTokens}, nil
}

// post sends body as JSON and decodes a 2xx answer into dst; anything else
// is a *ProviderError with the provider's message.
func post(ctx context.Context, hc *http.Client, name, url string, h http.Header, body, dst any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(raw))
	if err != nil {
		return &ProviderError{Provider: name, Message: err.Error()}
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &ProviderError{Provider: name, Message: err.Error()}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return &ProviderError{Provider: name, Status: resp.StatusCode, Message: "reading the answer: " + err.Error()}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Both APIs answer {"error": {"message": ...}}.
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message
		}
		if len(msg) > 500 {
			msg = msg[:500]
		}
		return &ProviderError{Provider: name, Status: resp.StatusCode, Message: msg}
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return &ProviderError{Provider: name, Status: resp.StatusCode, Message: "the answer is not valid JSON: " + err.Error()}
	}
	return nil
}
