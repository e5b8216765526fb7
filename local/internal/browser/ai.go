package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Element is an interactive element of a page, as the model sees it.
type Element struct {
	Tag      string            `json:"tag"`
	Text     string            `json:"text"`
	Attrs    map[string]string `json:"attrs"`
	Selector string            `json:"selector"`
	Href     string            `json:"href"`
}

// Snapshot is a page as the AI operations present it to a model: its
// text and its numbered interactive elements.
type Snapshot struct {
	Title    string    `json:"title"`
	URL      string    `json:"url"`
	Text     string    `json:"text"`
	Links    []Link    `json:"links"`
	Elements []Element `json:"elements"`
}

// Limits of what a snapshot sends to a model.
const (
	maxSnapshotText     = 40000
	maxSnapshotElements = 300
)

// snapshotJS collects the page's visible interactive elements with a CSS
// selector for each (by a unique id where there is one, else a path of
// :nth-of-type steps).
const snapshotJS = `(() => {
	const uniqueID = e => e.id && /^[A-Za-z][\w-]*$/.test(e.id) && document.querySelectorAll('#' + e.id).length === 1;
	const selector = el => {
		const parts = [];
		for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
			if (uniqueID(e)) { parts.unshift('#' + e.id); return parts.join(' > '); }
			if (e === document.documentElement) { parts.unshift('html'); break; }
			let i = 1;
			for (let s = e.previousElementSibling; s; s = s.previousElementSibling) if (s.tagName === e.tagName) i++;
			parts.unshift(e.tagName.toLowerCase() + ':nth-of-type(' + i + ')');
		}
		return parts.join(' > ');
	};
	const visible = el => {
		const r = el.getBoundingClientRect();
		if (r.width === 0 && r.height === 0) return false;
		const s = getComputedStyle(el);
		return s.visibility !== 'hidden' && s.display !== 'none';
	};
	const q = 'a[href], button, input:not([type=hidden]), select, textarea, summary, [role=button], [role=link], [role=checkbox], [role=tab], [role=menuitem], [onclick], [contenteditable=""], [contenteditable=true]';
	const elements = [];
	for (const el of document.querySelectorAll(q)) {
		if (!visible(el)) continue;
		const attrs = {};
		for (const k of ['type', 'name', 'placeholder', 'aria-label', 'title', 'role', 'value']) {
			const v = el.getAttribute(k);
			if (v) attrs[k] = v.slice(0, 100);
		}
		if (el.labels && el.labels.length) attrs.label = el.labels[0].innerText.replace(/\s+/g, ' ').trim().slice(0, 100);
		if (el.tagName === 'SELECT') attrs.options = Array.from(el.options).map(o => o.label).slice(0, 20).join(' | ');
		const text = (el.innerText || '').replace(/\s+/g, ' ').trim().slice(0, 100);
		elements.push({tag: el.tagName.toLowerCase(), text, attrs, selector: selector(el), href: el.tagName === 'A' ? el.href : ''});
		if (elements.length >= %d) break;
	}
	const links = [];
	for (const a of document.querySelectorAll('a[href]')) {
		if (a.href.startsWith('javascript:')) continue;
		links.push({text: (a.innerText || '').replace(/\s+/g, ' ').trim().slice(0, 100), href: a.href});
		if (links.length >= 200) break;
	}
	return {title: document.title, url: location.href, text: (document.body ? document.body.innerText : '').slice(0, %d), links, elements};
})()`

// Snapshot reads a tab as the AI operations present it to a model.
func (c *Controller) Snapshot(ctx context.Context, id string) (*Snapshot, error) {
	t, ctx, err := c.begin(ctx, id, true)
	if err != nil {
		return nil, err
	}
	defer c.end(t)
	var s Snapshot
	if err := t.eval(ctx, fmt.Sprintf(snapshotJS, maxSnapshotElements, maxSnapshotText), &s); err != nil {
		return nil, c.opErr(ctx, err)
	}
	return &s, nil
}

// Usage is the tokens an AI operation used.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
}

func (u *Usage) add(a *Answer) {
	u.InputTokens += a.InputTokens
	u.OutputTokens += a.OutputTokens
}

// Observed is an element a model chose, with the action it proposes.
type Observed struct {
	Action
	URL string // the link's target, for a link
}

const systemPrompt = `You help a program operate a web page in a headless browser. You are shown the page's text and a numbered list of its interactive elements. Answer with JSON only: no prose and no code fences.`

// describePage writes the page part of a prompt.
func describePage(b *strings.Builder, s *Snapshot, withElements bool) {
	fmt.Fprintf(b, "Page title: %s\nPage URL: %s\n\n", s.Title, s.URL)
	if withElements {
		b.WriteString("Interactive elements:\n")
		for i, e := range s.Elements {
			fmt.Fprintf(b, "[%d] <%s>", i, e.Tag)
			if e.Text != "" {
				fmt.Fprintf(b, " %q", e.Text)
			}
			for _, k := range []string{"type", "name", "label", "placeholder", "aria-label", "title", "role", "value", "options"} {
				if v := e.Attrs[k]; v != "" {
					fmt.Fprintf(b, " %s=%q", k, v)
				}
			}
			if e.Href != "" {
				fmt.Fprintf(b, " href=%q", e.Href)
			}
			b.WriteByte('\n')
		}
		if len(s.Elements) == 0 {
			b.WriteString("(none)\n")
		}
		b.WriteByte('\n')
	} else if len(s.Links) > 0 {
		b.WriteString("Links:\n")
		for _, l := range s.Links {
			fmt.Fprintf(b, "- %q -> %s\n", l.Text, l.Href)
		}
		b.WriteByte('\n')
	}
	b.WriteString("Page text:\n")
	b.WriteString(s.Text)
	b.WriteString("\n\n")
}

// observePrompt asks for the elements matching instruction; single asks
// for the one action that carries it out.
func observePrompt(s *Snapshot, instruction string, single bool) string {
	var b strings.Builder
	describePage(&b, s, true)
	if single {
		fmt.Fprintf(&b, "Task: choose the one action on one element that carries out this instruction: %s\n\n", instruction)
	} else {
		fmt.Fprintf(&b, "Task: list the elements that match this instruction, best match first: %s\n\n", instruction)
	}
	fmt.Fprintf(&b, `Answer with {"elements": [{"element": <number>, "description": "<the element, in a few words>", "method": "<one of %s>", "arguments": ["<argument>"]}]}. `, strings.Join(Methods, ", "))
	b.WriteString(`For fill and type the argument is the text, for press the key (e.g. Enter), for selectOption the option; other methods take no arguments. `)
	if single {
		b.WriteString(`Give at most one element; give none if no element can carry out the instruction.`)
	} else {
		b.WriteString(`Give an empty list if nothing matches.`)
	}
	return b.String()
}

// Observe asks the model for the elements of the page that match
// instruction, as replayable actions; with single, for the one action that
// carries it out.
func Observe(ctx context.Context, p Provider, model string, s *Snapshot, instruction string, single bool) ([]Observed, Usage, error) {
	var u Usage
	ans, err := p.Complete(ctx, Completion{Model: model, System: systemPrompt, Prompt: observePrompt(s, instruction, single)})
	if err != nil {
		return nil, u, err
	}
	u.add(ans)
	var out struct {
		Elements []struct {
			Element     *int     `json:"element"`
			Description string   `json:"description"`
			Method      string   `json:"method"`
			Arguments   []string `json:"arguments"`
		} `json:"elements"`
	}
	if err := decodeJSON(ans.Text, &out); err != nil {
		return nil, u, &ProviderError{Provider: p.Name(), Status: 200, Message: "the model's answer is not the JSON asked for: " + err.Error()}
	}
	var res []Observed
	for _, e := range out.Elements {
		if e.Element == nil || *e.Element < 0 || *e.Element >= len(s.Elements) {
			continue // an element that is not on the list
		}
		el := s.Elements[*e.Element]
		m, ok := canonicalMethod(e.Method)
		if !ok {
			m = "click"
		}
		desc := e.Description
		if desc == "" {
			desc = strings.TrimSpace(el.Tag + " " + el.Text)
		}
		res = append(res, Observed{Action: Action{Selector: el.Selector, Description: desc, Method: m, Arguments: e.Arguments}, URL: el.Href})
		if single {
			break
		}
	}
	return res, u, nil
}

// Extract asks the model for data from the page that matches schema;
// validate checks the answer (a second attempt is made with the checker's
// complaint).
func Extract(ctx context.Context, p Provider, model string, s *Snapshot, instruction string, schema map[string]any, validate func(any) error) (any, Usage, error) {
	var u Usage
	rawSchema, err := json.MarshalIndent(schema, "", "  ")
	if err != nil {
		return nil, u, err
	}
	var b strings.Builder
	describePage(&b, s, false)
	fmt.Fprintf(&b, "Task: %s\n\nAnswer with one JSON value that matches this JSON schema:\n%s\n", instruction, rawSchema)
	prompt := b.String()
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		ans, err := p.Complete(ctx, Completion{Model: model, System: systemPrompt, Prompt: prompt})
		if err != nil {
			return nil, u, err
		}
		u.add(ans)
		var v any
		if err := decodeJSON(ans.Text, &v); err != nil {
			lastErr = fmt.Errorf("the answer is not JSON: %w", err)
		} else if err := validate(v); err != nil {
			lastErr = fmt.Errorf("the answer does not match the schema: %w", err)
		} else {
			return v, u, nil
		}
		prompt = b.String() + "\nYour previous answer was rejected: " + lastErr.Error() + "\nPrevious answer:\n" + truncate(ans.Text, 2000) + "\n"
	}
	return nil, u, &ProviderError{Provider: p.Name(), Status: 200, Message: lastErr.Error()}
}

// decodeJSON reads a JSON value from a model's answer, tolerating code
// fences and text around it.
func decodeJSON(text string, dst any) error {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "```") {
		t = strings.TrimPrefix(t, "```")
		t = strings.TrimPrefix(t, "json")
		if i := strings.LastIndex(t, "```"); i >= 0 {
			t = t[:i]
		}
		t = strings.TrimSpace(t)
	}
	err := json.Unmarshal([]byte(t), dst)
	if err == nil {
		return nil
	}
	for _, pair := range [][2]string{{"{", "}"}, {"[", "]"}} {
		i, j := strings.Index(t, pair[0]), strings.LastIndex(t, pair[1])
		if i >= 0 && j > i {
			if json.Unmarshal([]byte(t[i:j+1]), dst) == nil {
				return nil
			}
		}
	}
	if t == "" {
		return errors.New("the answer is empty")
	}
	return err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
