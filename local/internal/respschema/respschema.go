// Package respschema compiles the JSON schemas of structured responses
// (an agent run's, a browser's extract) and checks an output against
// one. It touches nothing else.
package respschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/upstash/box-go/local/internal/errdefs"
)

// schemaURL names a run's response schema for the validator; it is never
// fetched.
const schemaURL = "urn:box:response-schema"

// Compile compiles a response schema as a request gives it; a schema
// that does not compile is an invalid argument.
func Compile(doc map[string]any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	// Round-trip through JSON so numbers are what the compiler expects.
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, errdefs.Invalid("json_schema: %v", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, errdefs.Invalid("json_schema: %v", err)
	}
	if err := c.AddResource(schemaURL, v); err != nil {
		return nil, errdefs.Invalid("json_schema: %v", err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, errdefs.Invalid("json_schema is not a valid JSON schema: %v", err)
	}
	return sch, nil
}

// Validate checks the final output of a structured run against the
// response schema.
func Validate(sch *jsonschema.Schema, output string) error {
	text := strings.TrimSpace(output)
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return fmt.Errorf("output is not JSON matching the response schema: %v; output starts with %q", err, truncate(text, 200))
	}
	if err := sch.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			// The first line names the schema; the rest say what failed
			// where ("- at '/verdict': value must be one of ...").
			msg := strings.TrimSpace(ve.Error())
			if _, rest, ok := strings.Cut(msg, "\n"); ok {
				msg = strings.TrimSpace(rest)
			}
			return fmt.Errorf("output does not match the response schema: %s", msg)
		}
		return fmt.Errorf("output does not match the response schema: %v", err)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
