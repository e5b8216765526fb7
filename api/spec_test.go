package api_test

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/upstash/box-go/api"
	"github.com/upstash/box-go/gen"
)

// wantOperationIDs is every operation the API has; gen/ names its Go identifiers
// after them, so renaming one is a breaking change for the SDK and boxd.
var wantOperationIDs = []string{
	// boxes
	"createBox", "listBoxes", "deleteBoxes", "getBox", "deleteBox", "createBoxFromSnapshot",
	"getBoxStatus", "pauseBox", "resumeBox", "getBoxLogs", "listBoxRuns", "getBoxRun",
	"cancelRun", "getInitCommand", "setInitCommand", "deleteInitCommand", "configureModel",
	"configureCustomRunner", "updateNetworkPolicy", "addSkill", "removeSkill", "addLabel",
	"removeLabel", "updateGitConfig", "updateGitConfigLegacy",
	// snapshots
	"createSnapshot", "listSnapshots", "deleteSnapshot", "deleteSnapshots",
	// account env
	"listEnv", "setAllEnv", "setEnv", "deleteEnv",
	// exec
	"execCommand", "execCode", "execStream", "codeStream", "execSession",
	// files
	"readFile", "writeFile", "listFiles", "uploadFiles", "downloadFile", "statFile",
	"makeDirectory", "renameFile", "removeFile",
	// git
	"gitClone", "gitStatus", "gitDiff", "gitCommit", "gitPush", "gitCheckout", "gitCreatePR",
	"gitCreateIssue", "gitExec",
	// agent
	"runAgent", "streamAgentRun",
	// schedules
	"createSchedule", "listSchedules", "getSchedule", "updateSchedule", "deleteSchedule",
	"pauseSchedule", "resumeSchedule",
	// public URLs
	"createPreview", "listPreviews", "deletePreview",
	// browser
	"createBrowserTab", "listBrowserTabs", "closeBrowserTab", "browserGoto", "getBrowserContent",
	"browserScreenshot", "browserExtract", "browserObserve", "browserAct", "browserConnect",
	"browserScreencast",
	// recordings
	"startBrowserRecording", "stopBrowserRecording", "listBrowserRecordings",
	"getBrowserRecording", "downloadBrowserRecording", "getBrowserRecordingPlaylist",
	// boxd's SSH server
	"getSSHInfo", "listSSHKeys", "addSSHKey", "deleteSSHKey",
	// desktop (the official SDK's desktop branch)
	"desktopStart", "desktopStream", "desktopStop", "desktopStatus", "desktopScreenshot",
	"desktopScreen", "desktopMouseMove", "desktopMouseClick", "desktopMouseDrag",
	"desktopMousePress", "desktopMouseRelease", "desktopMouseScroll", "desktopKeyboardType",
	"desktopKeyboardPress", "desktopOpen", "desktopLaunch", "desktopActions", "desktopAgentAct",
	"desktopAgentRun",
}

// boxdOperations are boxd's own: the cloud does not serve them, and each
// says so with x-box-server: boxd.
var boxdOperations = []string{"getSSHInfo", "listSSHKeys", "addSSHKey", "deleteSSHKey"}

// designedOperations are the operations whose wire no client the server is tested
// with sends; each must say so with x-box-origin: designed.
var designedOperations = []string{
	"updateSchedule", "statFile", "makeDirectory", "renameFile", "removeFile", "execSession",
	"gitCreateIssue", "updateGitConfig",
	"createBrowserTab", "listBrowserTabs", "closeBrowserTab", "browserGoto", "getBrowserContent",
	"browserScreenshot", "browserExtract", "browserObserve", "browserAct", "browserConnect",
	"browserScreencast",
	"startBrowserRecording", "stopBrowserRecording", "listBrowserRecordings",
	"getBrowserRecording", "downloadBrowserRecording", "getBrowserRecordingPlaylist",
	"getSSHInfo", "listSSHKeys", "addSSHKey", "deleteSSHKey",
}

// designedProperties are designed fields of otherwise observed schemas.
var designedProperties = map[string][]string{
	"BoxData":                  {"browser"},
	"CreateBoxRequest":         {"browser"},
	"GitCloneRequest":          {"depth", "directory", "folder"},
	"CreatePullRequestRequest": {"attach"},
	"PullRequest":              {"warning"},
	"GitExecResponse":          {"exit_code"},
}

// wireNameExceptions are JSON keys that are not snake_case on the wire, as observed.
var wireNameExceptions = map[string]bool{
	"toolCallId": true, // tool events of custom harnesses
	"execId":     true, // exec session frames
	"graceMs":    true,
}

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.Spec)
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	return doc
}

type operation struct {
	method, path string
	op           *openapi3.Operation
}

// operations returns every operation of the document, in a stable order.
func operations(doc *openapi3.T) []operation {
	var ops []operation
	for _, path := range slices.Sorted(maps.Keys(doc.Paths.Map())) {
		item := doc.Paths.Value(path)
		for _, method := range slices.Sorted(maps.Keys(item.Operations())) {
			ops = append(ops, operation{method: method, path: path, op: item.GetOperation(method)})
		}
	}
	return ops
}

func TestSpecIsValid(t *testing.T) {
	doc := loadSpec(t)
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi version = %q, want 3.0.3", doc.OpenAPI)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI document: %v", err)
	}
}

func TestOperationIDs(t *testing.T) {
	doc := loadSpec(t)
	got := map[string]string{}
	for _, o := range operations(doc) {
		where := o.method + " " + o.path
		if o.op.OperationID == "" {
			t.Errorf("%s has no operationId", where)
			continue
		}
		if prev, dup := got[o.op.OperationID]; dup {
			t.Errorf("operationId %s is used by both %s and %s", o.op.OperationID, prev, where)
		}
		got[o.op.OperationID] = where
	}
	for _, id := range wantOperationIDs {
		if _, ok := got[id]; !ok {
			t.Errorf("operation %s is missing", id)
		}
	}
	for id, where := range got {
		if !slices.Contains(wantOperationIDs, id) {
			t.Errorf("operation %s (%s) is not in wantOperationIDs; add it there if it is meant to exist", id, where)
		}
	}
}

func TestErrorResponsesUseErrorResponse(t *testing.T) {
	doc := loadSpec(t)
	const want = "#/components/schemas/ErrorResponse"
	for _, o := range operations(doc) {
		for code, ref := range o.op.Responses.Map() {
			if !strings.HasPrefix(code, "4") && !strings.HasPrefix(code, "5") && code != "default" {
				continue
			}
			where := fmt.Sprintf("%s: response %s", o.op.OperationID, code)
			if ref.Ref == "" {
				t.Errorf("%s is inline; use a shared components/responses entry", where)
			}
			if len(ref.Value.Content) != 1 {
				t.Errorf("%s has %d content types, want exactly application/json", where, len(ref.Value.Content))
			}
			media := ref.Value.Content.Get("application/json")
			if media == nil || media.Schema == nil || media.Schema.Ref != want {
				t.Errorf("%s does not use %s", where, want)
			}
		}
	}
	schema := doc.Components.Schemas["ErrorResponse"]
	if schema == nil {
		t.Fatal("schema ErrorResponse is missing")
	}
	if !slices.Equal(schema.Value.Required, []string{"error"}) || len(schema.Value.Properties) != 1 ||
		!schema.Value.Properties["error"].Value.Type.Is(openapi3.TypeString) {
		t.Errorf(`ErrorResponse must be exactly {"error": string} (required)`)
	}
}

func TestSecurity(t *testing.T) {
	doc := loadSpec(t)
	schemes := doc.Components.SecuritySchemes
	if len(schemes) != 2 {
		t.Fatalf("want exactly two security schemes (BoxApiKey, BearerAuth), got %d", len(schemes))
	}
	if ref := schemes["BoxApiKey"]; ref == nil {
		t.Error("security scheme BoxApiKey is missing")
	} else if s := ref.Value; s.Type != "apiKey" || s.In != "header" || s.Name != "X-Box-Api-Key" {
		t.Errorf("security scheme BoxApiKey = {type %q, in %q, name %q}, want apiKey in header X-Box-Api-Key", s.Type, s.In, s.Name)
	}
	if ref := schemes["BearerAuth"]; ref == nil {
		t.Error("security scheme BearerAuth is missing")
	} else if s := ref.Value; s.Type != "http" || !strings.EqualFold(s.Scheme, "bearer") {
		t.Errorf("security scheme BearerAuth = {type %q, scheme %q}, want http bearer", s.Type, s.Scheme)
	} else if s.Extensions["x-box-origin"] != "designed" || s.Extensions["x-box-evidence"] != "newer-sdk" {
		t.Error("security scheme BearerAuth must be marked x-box-origin: designed, x-box-evidence: newer-sdk")
	}
	// Either credential alone is enough: two requirements, one scheme each.
	var got []string
	for _, req := range doc.Security {
		if len(req) != 1 {
			t.Errorf("global security requirement %v names %d schemes, want one", req, len(req))
		}
		for name := range req {
			got = append(got, name)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"BearerAuth", "BoxApiKey"}) {
		t.Errorf("global security = %v, want [{BoxApiKey: []}, {BearerAuth: []}]", doc.Security)
	}
	for _, o := range operations(doc) {
		if o.op.Security != nil {
			t.Errorf("%s overrides the global security requirement", o.op.OperationID)
		}
	}
}

// TestGitConfigPaths checks that the git identity has the path today's
// cloud serves as its operation, and the older path as a deprecated twin
// with the same wire.
func TestGitConfigPaths(t *testing.T) {
	doc := loadSpec(t)
	primary := doc.Paths.Value("/v2/box/{id}/config/git")
	legacy := doc.Paths.Value("/v2/box/{id}/git-config")
	if primary == nil || primary.Put == nil || legacy == nil || legacy.Put == nil {
		t.Fatal("want PUT /v2/box/{id}/config/git and PUT /v2/box/{id}/git-config")
	}
	p, l := primary.Put, legacy.Put
	if p.OperationID != "updateGitConfig" || p.Deprecated {
		t.Errorf("PUT /config/git = %s (deprecated %v), want updateGitConfig, not deprecated", p.OperationID, p.Deprecated)
	}
	if l.OperationID != "updateGitConfigLegacy" || !l.Deprecated {
		t.Errorf("PUT /git-config = %s (deprecated %v), want updateGitConfigLegacy, deprecated", l.OperationID, l.Deprecated)
	}
	if p.RequestBody.Value.Content.Get("application/json").Schema.Ref != l.RequestBody.Value.Content.Get("application/json").Schema.Ref {
		t.Error("the two git identity paths take different bodies")
	}
	for code, r := range p.Responses.Map() {
		lr := l.Responses.Value(code)
		if lr == nil || (r.Ref != lr.Ref) || (r.Ref == "" && r.Value.Content.Get("application/json").Schema.Ref != lr.Value.Content.Get("application/json").Schema.Ref) {
			t.Errorf("response %s differs between the two git identity paths", code)
		}
	}
	if len(p.Responses.Map()) != len(l.Responses.Map()) {
		t.Error("the two git identity paths answer different statuses")
	}
}

func TestDesignedWireIsMarked(t *testing.T) {
	doc := loadSpec(t)
	byID := map[string]*openapi3.Operation{}
	for _, o := range operations(doc) {
		byID[o.op.OperationID] = o.op
		checkProvenance(t, o.op.OperationID, o.op.Extensions)
		for _, p := range o.op.Parameters {
			checkProvenance(t, o.op.OperationID+" parameter "+p.Value.Name, p.Value.Extensions)
		}
	}
	for _, id := range designedOperations {
		if op := byID[id]; op == nil || op.Extensions["x-box-origin"] != "designed" {
			t.Errorf("operation %s must be marked x-box-origin: designed", id)
		}
	}
	for _, o := range operations(doc) {
		boxd := slices.Contains(boxdOperations, o.op.OperationID)
		if got := o.op.Extensions["x-box-server"]; (got == "boxd") != boxd || (got != nil && got != "boxd") {
			t.Errorf("operation %s: x-box-server = %v; boxd's own operations (boxdOperations) say boxd, the others nothing", o.op.OperationID, got)
		}
	}
	for schema, props := range designedProperties {
		for _, prop := range props {
			p := doc.Components.Schemas[schema].Value.Properties[prop]
			if p == nil || p.Value.Extensions["x-box-origin"] != "designed" {
				t.Errorf("%s.%s must be marked x-box-origin: designed", schema, prop)
			}
		}
	}
	for _, c := range []struct{ op, param string }{
		{"readFile", "offset"}, {"readFile", "length"}, {"deleteSnapshots", "all"},
	} {
		p := byID[c.op].Parameters.GetByInAndName("query", c.param)
		if p == nil || p.Extensions["x-box-origin"] != "designed" {
			t.Errorf("%s query parameter %s must be marked x-box-origin: designed", c.op, c.param)
		}
	}
	if r := doc.Components.Responses["PayloadTooLarge"]; r == nil || r.Value.Extensions["x-box-origin"] != "designed" {
		t.Error("response PayloadTooLarge (413) must be marked x-box-origin: designed")
	}
	for name, s := range doc.Components.Schemas {
		checkProvenance(t, "schema "+name, s.Value.Extensions)
		for prop, p := range s.Value.Properties {
			checkProvenance(t, "schema "+name+"."+prop, p.Value.Extensions)
		}
	}
}

// checkProvenance checks the values of the provenance extensions where present.
func checkProvenance(t *testing.T, where string, ext map[string]any) {
	t.Helper()
	origin, hasOrigin := ext["x-box-origin"]
	if hasOrigin && origin != "designed" {
		t.Errorf("%s: x-box-origin = %v, want designed", where, origin)
	}
	evidence, ok := ext["x-box-evidence"]
	if !ok {
		return
	}
	switch evidence {
	case "sdk-0.5.5", "sdk-0.1":
		if hasOrigin {
			t.Errorf("%s: wire the 0.5.5 SDK sends is not designed here (x-box-origin)", where)
		}
	case "newer-sdk", "branch-sdk", "none":
		if !hasOrigin {
			t.Errorf("%s: x-box-evidence %v without x-box-origin: designed", where, evidence)
		}
	default:
		t.Errorf("%s: x-box-evidence = %v, want sdk-0.5.5, sdk-0.1, newer-sdk, branch-sdk or none", where, evidence)
	}
}

// TestEveryOperationSaysWhereItsWireComesFrom: each operation names the
// client whose wire it follows: the published 0.5.5 SDK, a newer official
// SDK's source, a branch of it, or none.
func TestEveryOperationSaysWhereItsWireComesFrom(t *testing.T) {
	doc := loadSpec(t)
	counts := map[any]int{}
	for _, o := range operations(doc) {
		e, ok := o.op.Extensions["x-box-evidence"]
		if !ok {
			t.Errorf("%s %s (%s) has no x-box-evidence", o.method, o.path, o.op.OperationID)
		}
		counts[e]++
	}
	if counts["sdk-0.5.5"] == 0 || counts["newer-sdk"] == 0 {
		t.Errorf("evidence counts %v: the spec has both 0.5.5 and newer wire", counts)
	}
	for _, c := range []struct{ op, want string }{
		{"updateGitConfig", "newer-sdk"}, {"updateGitConfigLegacy", "sdk-0.5.5"}, {"createBox", "sdk-0.5.5"}, {"cancelRun", "sdk-0.5.5"}, {"getBoxRun", "sdk-0.1"},
		// git.createIssue is in the main branch's client.ts (newest-sdk.md G8).
		{"gitCreateIssue", "newer-sdk"},
	} {
		for _, o := range operations(doc) {
			if o.op.OperationID == c.op && o.op.Extensions["x-box-evidence"] != c.want {
				t.Errorf("%s: x-box-evidence = %v, want %s", c.op, o.op.Extensions["x-box-evidence"], c.want)
			}
		}
	}
}

func TestWireNamesAreSnakeCase(t *testing.T) {
	doc := loadSpec(t)
	var walk func(where string, s *openapi3.SchemaRef)
	seen := map[*openapi3.Schema]bool{}
	walk = func(where string, s *openapi3.SchemaRef) {
		if s == nil || s.Value == nil || seen[s.Value] {
			return
		}
		seen[s.Value] = true
		for name, p := range s.Value.Properties {
			if !snakeCase.MatchString(name) && !wireNameExceptions[name] {
				t.Errorf("%s: property %q is not snake_case", where, name)
			}
			walk(where+"."+name, p)
		}
		walk(where+"[]", s.Value.Items)
		for _, sub := range s.Value.AllOf {
			walk(where, sub)
		}
	}
	for name, s := range doc.Components.Schemas {
		walk(name, s)
	}
	for _, o := range operations(doc) {
		for _, p := range o.op.Parameters {
			if p.Value.In == "query" && !snakeCase.MatchString(p.Value.Name) {
				t.Errorf("%s: query parameter %q is not snake_case", o.op.OperationID, p.Value.Name)
			}
		}
	}
}

func TestRequestBodiesAreNamedComponents(t *testing.T) {
	doc := loadSpec(t)
	for _, o := range operations(doc) {
		if o.op.RequestBody == nil {
			continue
		}
		for ct, media := range o.op.RequestBody.Value.Content {
			if media.Schema == nil || media.Schema.Ref == "" {
				t.Errorf("%s: %s request body must be a $ref to a components schema", o.op.OperationID, ct)
			}
		}
	}
}

// samplePath fills the path template with values the server can bind.
func samplePath(path string) string {
	return regexp.MustCompile(`\{([^}]+)\}`).ReplaceAllStringFunc(path, func(m string) string {
		if m == "{port}" {
			return "3000"
		}
		return "x-" + strings.Trim(m, "{}")
	})
}

// TestGeneratedRoutes registers the generated std-http routes (which panics on a
// ServeMux pattern conflict) and checks that every operation's path reaches its own
// route: literal segments such as /v2/box/snapshots must win over /v2/box/{id}.
func TestGeneratedRoutes(t *testing.T) {
	doc := loadSpec(t)
	var matched, label, envKey string
	record := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			matched, label, envKey = r.Pattern, r.PathValue("label"), r.PathValue("key")
			w.WriteHeader(http.StatusNoContent)
		})
	}
	var handler http.Handler
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("registering the generated routes panicked: %v", p)
			}
		}()
		handler = gen.HandlerWithOptions(gen.NewStrictHandler(nil, nil), gen.StdHTTPServerOptions{
			Middlewares: []gen.MiddlewareFunc{record},
		})
	}()

	serve := func(method, target string) (int, string) {
		matched = ""
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
		return rec.Code, matched
	}
	for _, o := range operations(doc) {
		if o.op.OperationID == "execSession" {
			continue // registered by hand: a strict handler cannot upgrade to WebSocket
		}
		query := []string{}
		for _, p := range o.op.Parameters {
			if p.Value.In == "query" && p.Value.Required {
				query = append(query, p.Value.Name+"=x")
			}
		}
		target := samplePath(o.path)
		if len(query) > 0 {
			target += "?" + strings.Join(query, "&")
		}
		want := strings.ToUpper(o.method) + " " + o.path
		if code, got := serve(o.method, target); code != http.StatusNoContent || got != want {
			t.Errorf("%s %s (%s) reached %q with status %d, want route %q",
				o.method, target, o.op.OperationID, got, code, want)
		}
	}

	// Wire details from the reference: skill ids arrive with raw slashes, labels and env
	// keys arrive URL-encoded.
	if _, got := serve(http.MethodDelete, "/v2/box/b1/config/skills/owner/repo/skill-name"); got != "DELETE /v2/box/{id}/config/skills/{owner}/{repo}/{skill}" {
		t.Errorf("skill removal reached %q", got)
	}
	if _, got := serve(http.MethodDelete, "/v2/box/b1/config/labels/env%3Aprod"); got != "DELETE /v2/box/{id}/config/labels/{label}" || label != "env:prod" {
		t.Errorf("label removal reached %q with label %q, want env:prod", got, label)
	}
	if _, got := serve(http.MethodPut, "/v2/box/settings/env/MY%20KEY%2FSLASH"); got != "PUT /v2/box/settings/env/{key}" || envKey != "MY KEY/SLASH" {
		t.Errorf("env upsert reached %q with key %q, want %q", got, envKey, "MY KEY/SLASH")
	}
}

// designedSchemas are whole schemas that only newer official SDKs than the one the
// server is tested with read; each must say so on the schema itself.
var designedSchemas = []string{"PublicURLListItem"}

func TestDesignedSchemasAreMarked(t *testing.T) {
	doc := loadSpec(t)
	for _, name := range designedSchemas {
		s := doc.Components.Schemas[name]
		if s == nil {
			t.Errorf("schema %s is missing", name)
			continue
		}
		if s.Value.Extensions["x-box-origin"] != "designed" || s.Value.Extensions["x-box-evidence"] != "newer-sdk" {
			t.Errorf("schema %s must be marked x-box-origin: designed and x-box-evidence: newer-sdk", name)
		}
	}
	// The list of public URLs is a list of these: it never carries credentials.
	items := doc.Components.Schemas["PreviewsResponse"].Value.Properties["previews"].Value.Items
	if items.Ref != "#/components/schemas/PublicURLListItem" {
		t.Errorf("PreviewsResponse.previews items = %q, want PublicURLListItem", items.Ref)
	}
	for _, secret := range []string{"token", "username", "password"} {
		if _, ok := doc.Components.Schemas["PublicURLListItem"].Value.Properties[secret]; ok {
			t.Errorf("PublicURLListItem has %q: a list must not carry credentials", secret)
		}
	}
}

// TestDesktopBranchBrowserWire: the desktop branch of the official SDK
// drives the browser with no tab (goto, content, extract, observe) and
// reads links as {t, h}. The tab stays optional there, and a link keeps
// {text, href} required beside its branch-only pair.
func TestDesktopBranchBrowserWire(t *testing.T) {
	doc := loadSpec(t)
	byID := map[string]*openapi3.Operation{}
	for _, o := range operations(doc) {
		byID[o.op.OperationID] = o.op
	}
	p := byID["getBrowserContent"].Parameters.GetByInAndName("query", "tab")
	if p == nil || p.Required {
		t.Error("getBrowserContent: query parameter tab must exist and be optional")
	}
	if p := byID["browserScreenshot"].Parameters.GetByInAndName("query", "tab"); p == nil || !p.Required {
		t.Error("browserScreenshot: query parameter tab must stay required")
	}
	for _, name := range []string{"BrowserGotoRequest", "BrowserExtractRequest", "BrowserObserveRequest"} {
		s := doc.Components.Schemas[name].Value
		if s.Properties["tab"] == nil || slices.Contains(s.Required, "tab") {
			t.Errorf("%s: tab must exist and be optional", name)
		}
	}
	link := doc.Components.Schemas["BrowserLink"].Value
	if !slices.Equal(link.Required, []string{"text", "href"}) {
		t.Errorf("BrowserLink required = %v, want [text href]", link.Required)
	}
	for _, prop := range []string{"t", "h"} {
		p := link.Properties[prop]
		if p == nil || p.Value.Extensions["x-box-evidence"] != "branch-sdk" {
			t.Errorf("BrowserLink.%s must exist with x-box-evidence: branch-sdk", prop)
		}
	}
}
