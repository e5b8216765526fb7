package box

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// modelConsts reads models.go and returns each Model constant's value by
// name, and whether the constant has a doc comment of its own.
func modelConsts(t *testing.T) (values map[string]string, documented map[string]bool) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "models.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	values, documented = map[string]string{}, map[string]bool{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Model" || len(vs.Names) != 1 || len(vs.Values) != 1 {
				t.Fatalf("%s: every Model constant is one name with its own value", vs.Names[0].Name)
			}
			lit, ok := vs.Values[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Fatalf("%s is not a string literal", vs.Names[0].Name)
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			values[vs.Names[0].Name] = v
			documented[vs.Names[0].Name] = vs.Doc != nil
		}
	}
	return values, documented
}

// newestModels are the model ids the newest official SDK (0.7.3 and main)
// added, from reference/newest-sdk.md d.12.
var newestModels = []string{
	"anthropic/claude-opus-5-5",
	"openai/gpt-6.1-sol", "openai/gpt-6-sol", "openai/gpt-6-luna",
	"openrouter/anthropic/claude-fable-5.1", "openrouter/anthropic/claude-opus-5.5",
	"openrouter/openai/gpt-6.1-sol", "openrouter/openai/gpt-6-astra", "openrouter/openai/gpt-6-sol", "openrouter/openai/gpt-6-luna",
	"vercel/anthropic/claude-fable-5.1", "vercel/anthropic/claude-opus-5.5",
	"vercel/openai/gpt-6.1-sol", "vercel/openai/gpt-6-astra", "vercel/openai/gpt-6-sol", "vercel/openai/gpt-6-luna",
	"vercel/google/gemini-3.8-flash",
	"opencode/claude-fable-5-1", "opencode/claude-opus-5-5",
	"opencode/gpt-6.1-sol", "opencode/gpt-6-astra", "opencode/gpt-6-sol", "opencode/gpt-6-luna",
	"cursor/claude-opus-5-5",
	"vercel/spacexai/grok-build-0.1", "vercel/spacexai/grok-4.7", "vercel/spacexai/grok-4.3", "vercel/spacexai/grok-4.20-reasoning",
}

func TestModelConstants(t *testing.T) {
	t.Parallel()
	values, documented := modelConsts(t)
	if len(values) == 0 {
		t.Fatal("no Model constants found")
	}
	providers := map[string]bool{"anthropic": true, "openai": true, "openrouter": true, "vercel": true, "opencode": true, "cursor": true}
	names := map[string]string{} // value -> constant
	for name, v := range values {
		if other, ok := names[v]; ok {
			t.Errorf("%s and %s are both %q", name, other, v)
		}
		names[v] = name
		if strings.HasPrefix(v, "vercel/xai/") {
			t.Errorf("%s = %q: the gateway serves Grok as vercel/spacexai/", name, v)
		}
		provider, rest, ok := strings.Cut(v, "/")
		if !ok || rest == "" || !providers[provider] {
			t.Errorf("%s = %q has no known provider prefix", name, v)
		}
	}

	if len(newestModels) != 28 {
		t.Fatalf("the reference lists 28 new ids; the test has %d", len(newestModels))
	}
	for _, v := range newestModels {
		name, ok := names[v]
		switch {
		case !ok:
			t.Errorf("no constant for %q", v)
		case !documented[name]:
			t.Errorf("%s (%q) has no doc comment", name, v)
		}
	}

	// The Grok constants kept their names when the ids moved.
	for name, want := range map[string]string{
		"VercelGrokBuild0_1":      "vercel/spacexai/grok-build-0.1",
		"VercelGrok4_3":           "vercel/spacexai/grok-4.3",
		"VercelGrok4_20Reasoning": "vercel/spacexai/grok-4.20-reasoning",
	} {
		if values[name] != want {
			t.Errorf("%s = %q, want %q", name, values[name], want)
		}
	}
}
