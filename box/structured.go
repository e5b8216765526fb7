package box

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// OutputError is returned when an agent's final output is not JSON that
// matches the response schema. Raw holds the start of the output.
type OutputError struct {
	Reason string
	Raw    string
	Err    error
}

func (e *OutputError) Error() string {
	return "box: failed to parse structured output: " + e.Reason + "\n\nRaw output: " + e.Raw
}

func (e *OutputError) Unwrap() error { return e.Err }

// SchemaFor returns the JSON schema RunAs sends for T. Properties come
// from the fields' json names; fields without omitempty are required;
// structs allow no other properties. Two struct tags refine it:
//
//	Severity string `json:"severity" jsonschema:"how bad the finding is" enum:"high,medium,low"`
//
// `jsonschema` is the property's description and `enum` lists its allowed
// values (for a slice, the allowed values of its items).
func SchemaFor[T any]() (map[string]any, error) {
	s, _, err := schemaFor(reflect.TypeFor[T]())
	return s, err
}

func schemaFor(t reflect.Type) (map[string]any, *jsonschema.Resolved, error) {
	s, err := jsonschema.ForType(t, nil)
	if err != nil {
		if field := badField(t, map[reflect.Type]bool{}); field != "" {
			return nil, nil, invalidf("box: cannot derive a JSON schema for %s: field %s: %w", t, field, err)
		}
		return nil, nil, invalidf("box: cannot derive a JSON schema for %s: %w", t, err)
	}
	if err := applyEnums(t, s); err != nil {
		return nil, nil, err
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, nil, invalidf("box: invalid JSON schema: %w", err)
	}
	m, err := schemaMap(s)
	return m, rs, err
}

// badField names the field of t (a path such as Inner.C) whose type
// has no JSON schema, or returns "" when no field is to blame.
func badField(t reflect.Type, seen map[reflect.Type]bool) string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return ""
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Tag.Get("json") == "-" {
			continue
		}
		if _, err := jsonschema.ForType(f.Type, nil); err != nil {
			if sub := badField(f.Type, seen); sub != "" {
				return f.Name + "." + sub
			}
			return f.Name
		}
	}
	return ""
}

func schemaMap(s *jsonschema.Schema) (map[string]any, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	delete(m, "$schema")
	return m, nil
}

// applyEnums copies `enum` struct tags into the schema derived for t.
func applyEnums(t reflect.Type, s *jsonschema.Schema) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if s.Items != nil {
			return applyEnums(t.Elem(), s.Items)
		}
	case reflect.Map:
		if s.AdditionalProperties != nil {
			return applyEnums(t.Elem(), s.AdditionalProperties)
		}
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			ps := s.Properties[name]
			if ps == nil {
				continue
			}
			if tag, ok := f.Tag.Lookup("enum"); ok {
				target := ps
				ft := f.Type
				for ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if (ft.Kind() == reflect.Slice || ft.Kind() == reflect.Array) && ps.Items != nil {
					target, ft = ps.Items, ft.Elem()
				}
				vals, err := enumValues(ft, tag)
				if err != nil {
					return invalidf("box: field %s of %s: enum tag: %w", f.Name, t, err)
				}
				target.Enum = vals
			}
			if err := applyEnums(f.Type, ps); err != nil {
				return err
			}
		}
	}
	return nil
}

// enumValues parses an `enum` tag for a field of type t.
func enumValues(t reflect.Type, tag string) ([]any, error) {
	var out []any
	for _, v := range strings.Split(tag, ",") {
		v = strings.TrimSpace(v)
		switch t.Kind() {
		case reflect.String:
			out = append(out, v)
		default:
			var x any
			if err := json.Unmarshal([]byte(v), &x); err != nil {
				return nil, fmt.Errorf("enum value %q is not valid for a %s", v, t.Kind())
			}
			out = append(out, x)
		}
	}
	return out, nil
}

// decodeOutput checks out against rs and decodes it into dst.
func decodeOutput(out string, rs *jsonschema.Resolved, dst any) error {
	text := strings.TrimSpace(out)
	raw := text
	if len(raw) > 500 {
		raw = raw[:500]
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return &OutputError{Reason: "not JSON: " + err.Error(), Raw: raw, Err: err}
	}
	if err := rs.Validate(v); err != nil {
		return &OutputError{Reason: err.Error(), Raw: raw, Err: err}
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	if err := dec.Decode(dst); err != nil {
		return &OutputError{Reason: err.Error(), Raw: raw, Err: err}
	}
	return nil
}

// RunAs runs the agent with a response schema derived from T (see
// SchemaFor) and decodes the final output into a T. The server enforces
// the schema; the output is checked again here. An output that does not
// match is an *OutputError naming the field and showing the output's
// start. It is not retried: the run it came from was billed, and
// MaxRetries only resends a run that never started (see
// AgentParams.MaxRetries). Webhook is not supported.
func RunAs[T any](ctx context.Context, a *Agent, p *AgentParams, opts ...Option) (T, *Run, error) {
	ctx = withCallOptions(ctx, opts)
	var zero T
	if err := a.check(p); err != nil {
		return zero, nil, err
	}
	if p.Webhook != nil {
		return zero, nil, invalidf("box: RunAs does not take a Webhook")
	}
	schema, rs, err := schemaFor(reflect.TypeFor[T]())
	if err != nil {
		return zero, nil, err
	}
	var v T
	run, _, err := a.runWithRetries(ctx, p, schema, func(out string) error {
		v = zero
		return decodeOutput(out, rs, &v)
	})
	if err != nil {
		return zero, run, err
	}
	return v, run, nil
}

// RunJSON runs the agent with a raw JSON schema (whose root must describe
// an object) and returns the output as a map, checked against the schema.
func (a *Agent) RunJSON(ctx context.Context, p *AgentParams, schema map[string]any, opts ...Option) (map[string]any, *Run, error) {
	ctx = withCallOptions(ctx, opts)
	if err := a.check(p); err != nil {
		return nil, nil, err
	}
	if p.Webhook != nil {
		return nil, nil, invalidf("box: RunJSON does not take a Webhook")
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, nil, invalidf("box: schema: %w", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, nil, invalidf("box: schema: %w", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, nil, invalidf("box: invalid JSON schema: %w", err)
	}
	var out map[string]any
	run, _, err := a.runWithRetries(ctx, p, schema, func(text string) error {
		out = nil
		return decodeOutput(text, rs, &out)
	})
	if err != nil {
		return nil, run, err
	}
	return out, run, nil
}
