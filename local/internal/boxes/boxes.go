// Package boxes serves the API's operations on boxes themselves: create
// (with its validation), list, get, delete, status, pause, resume, logs,
// run records, labels, skills, the account's and the box's environment,
// the init command and the network policy. It is the core's wire: the
// state behind every operation is the core's (package core), and the
// images and the network are reached through Config. Its errors are
// errdefs kinds.
package boxes

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/egress"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/feature/agentrun"
	"github.com/upstash/box-go/local/internal/store"
	"github.com/upstash/box-go/local/internal/wire"
)

// Images is what creating a box needs of boxd's runtime images.
type Images interface {
	// ForCreate makes sure the image of a new box of runtime is in the
	// store, and returns its id, held until release is called.
	ForCreate(ctx context.Context, runtime string, browser bool) (id string, release func(), err error)
}

// Config configures the operations.
type Config struct {
	Core   *core.Core
	Images Images
	// PolicyChanged applies a box's new network policy to its open
	// connections.
	PolicyChanged func(id string)
	// Desktops reports whether boxes may have a desktop here: nil, or
	// why not (an errdefs kind).
	Desktops func() error
}

// Boxes serves the operations on boxes.
type Boxes struct {
	core *core.Core
	db   *store.Store
	cfg  Config
}

// New returns the operations on boxes.
func New(cfg Config) *Boxes { return &Boxes{core: cfg.Core, db: cfg.Core.Store(), cfg: cfg} }

var (
	labelRE = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)
	envKey  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

const maxTTL = 259200

// Runtimes are the runtimes a box may be created with.
var Runtimes = []string{"node", "python", "golang", "ruby", "rust", "node-alpine", "python-alpine", "golang-alpine", "ruby-alpine", "rust-alpine"}

func validateLabels(labels []string) error {
	if len(labels) > 5 {
		return errdefs.Invalid("labels: at most 5 labels, got %d", len(labels))
	}
	seen := map[string]bool{}
	for _, l := range labels {
		switch {
		case l == "":
			return errdefs.Invalid("labels: empty label")
		case len(l) > 20:
			return errdefs.Invalid("labels: label %q is longer than 20 characters", l)
		case !labelRE.MatchString(l):
			return errdefs.Invalid("labels: label %q contains invalid characters", l)
		case seen[l]:
			return errdefs.Invalid("labels: label %q given twice", l)
		}
		seen[l] = true
	}
	return nil
}

func ValidateCreate(r *gen.CreateBoxRequest) error {
	if r.Name != nil {
		n := *r.Name
		if n == "" || len(n) > 64 || strings.ContainsAny(n, "/?#% \t\r\n") {
			return errdefs.Invalid("name must be 1 to 64 characters without spaces, '/', '?', '#' or '%%'")
		}
	}
	if err := validateLabels(r.Labels); err != nil {
		return err
	}
	if strings.ContainsAny(wire.Deref(r.GitUserName)+wire.Deref(r.GitUserEmail), "\x00\r\n") {
		return errdefs.Invalid("git_user_name and git_user_email must be one line")
	}
	if r.Size != nil && !slices.Contains([]gen.BoxSize{gen.BoxSizeSmall, gen.BoxSizeMedium, gen.BoxSizeLarge}, *r.Size) {
		return errdefs.Invalid("size must be small, medium or large, not %q", *r.Size)
	}
	if r.Runtime != nil && !slices.Contains(Runtimes, *r.Runtime) {
		return errdefs.Invalid("runtime must be one of %s, not %q", strings.Join(Runtimes, ", "), *r.Runtime)
	}
	if err := validateEnv(r.EnvVars); err != nil {
		return errdefs.Invalid("env_vars: %v", err)
	}
	if np := r.NetworkPolicy; np != nil {
		if err := validateNetworkPolicy(np); err != nil {
			return err
		}
	}
	if err := validateAttachHeaders(r.AttachHeaders); err != nil {
		return err
	}
	if r.Agent != nil && *r.Agent == "custom" && r.CustomRunner == nil {
		return errdefs.Invalid("custom_runner is required when agent is custom")
	}
	if r.CustomRunner != nil && r.CustomRunner.Command == "" {
		return errdefs.Invalid("custom_runner.command is required")
	}
	if r.InitCommand != nil {
		if err := validateInitCommand(*r.InitCommand); err != nil {
			return err
		}
	}
	if r.TTL != nil {
		if r.Ephemeral == nil || !*r.Ephemeral {
			return errdefs.Invalid("ttl is only for ephemeral boxes")
		}
		if *r.TTL < 1 || *r.TTL > maxTTL {
			return errdefs.Invalid("ttl must be between 1 and %d seconds, got %d", maxTTL, *r.TTL)
		}
	}
	return nil
}

func (x *Boxes) CreateBox(ctx context.Context, req gen.CreateBoxRequestObject) (gen.CreateBoxResponseObject, error) {
	body := req.Body
	if body == nil {
		body = &gen.CreateBoxRequest{}
	}
	b, err := x.Create(ctx, body, nil)
	if err != nil {
		return nil, err
	}
	return gen.CreateBox200JSONResponse(wire.BoxData(b)), nil
}

// Create validates body and makes the box: its record, its directories,
// and its sandbox, started in the background. fill, when not nil, puts
// files into the directories before anything runs in the box (a restore
// from a snapshot); if it fails, the box is removed.
func (x *Boxes) Create(ctx context.Context, body *gen.CreateBoxRequest, fill func(*store.Box) error) (*store.Box, error) {
	if err := ValidateCreate(body); err != nil {
		return nil, err
	}
	if err := x.core.NeedDisk("create a box"); err != nil {
		return nil, err
	}
	desktop := wire.Deref(body.Desktop)
	if desktop && x.cfg.Desktops != nil {
		if err := x.cfg.Desktops(); err != nil {
			return nil, err
		}
	}
	// A browser or a desktop runs on the host's /usr.
	imageID, release, err := x.cfg.Images.ForCreate(ctx, wire.Deref(body.Runtime), wire.Deref(body.Browser) || desktop)
	if err != nil {
		return nil, err
	}
	defer release()
	now := time.Now()
	b := &store.Box{
		ID:            core.NewID("box-"),
		Name:          wire.Deref(body.Name),
		Labels:        body.Labels,
		Size:          string(wire.DerefOr(body.Size, gen.BoxSizeSmall)),
		KeepAlive:     wire.Deref(body.KeepAlive),
		InitCommand:   wire.Deref(body.InitCommand),
		Model:         wire.Deref(body.Model),
		Agent:         wire.Deref(body.Agent),
		AgentAPIKey:   wire.Deref(body.AgentAPIKey),
		Runtime:       wire.Deref(body.Runtime),
		GitHubToken:   wire.Deref(body.GithubToken),
		GitUserName:   wire.Deref(body.GitUserName),
		GitUserEmail:  wire.Deref(body.GitUserEmail),
		EnvVars:       x.withAccountEnv(body.EnvVars),
		AttachHeaders: body.AttachHeaders,
		Skills:        body.Skills,
		Ephemeral:     wire.Deref(body.Ephemeral),
		Browser:       wire.Deref(body.Browser),
		Desktop:       desktop,
		Image:         imageID,
		Status:        "idle",
		CreatedAt:     now.Unix(),
		UpdatedAt:     now.Unix(),
		Seq:           now.UnixNano(),
	}
	if b.Agent == "" && b.Model != "" && !b.Ephemeral {
		// The official SDKs' first releases (0.1.x) send a model and no
		// agent: the model names the harness, as on the cloud.
		b.Agent = agentrun.InferHarness(b.Model)
	}
	if body.CustomRunner != nil {
		b.CustomRunner = wire.Raw(body.CustomRunner)
	}
	if body.NetworkPolicy != nil {
		b.NetworkPolicy = wire.Raw(body.NetworkPolicy)
	}
	if len(body.McpServers) > 0 {
		b.MCPServers = wire.Raw(body.McpServers)
	}
	if b.Ephemeral {
		// On the server's clock, which also times the deletion.
		b.ExpiresAt = x.core.Clock().Now().Unix() + wire.DerefOr(body.TTL, maxTTL)
	}
	if err := x.core.Create(b, fill); err != nil {
		return nil, err
	}
	return b, nil
}

func (x *Boxes) ListBoxes(ctx context.Context, req gen.ListBoxesRequestObject) (gen.ListBoxesResponseObject, error) {
	all, err := x.db.Boxes()
	if err != nil {
		return nil, err
	}
	out := gen.ListBoxes200JSONResponse{}
	for _, b := range all {
		if req.Params.Label != nil && !slices.Contains(b.Labels, *req.Params.Label) {
			continue
		}
		out = append(out, wire.BoxData(b))
	}
	return out, nil
}

func (x *Boxes) GetBox(ctx context.Context, req gen.GetBoxRequestObject) (gen.GetBoxResponseObject, error) {
	b, err := x.core.Box(req.ID)
	if err != nil {
		return nil, err
	}
	return gen.GetBox200JSONResponse(wire.BoxData(b)), nil
}

func (x *Boxes) DeleteBox(ctx context.Context, req gen.DeleteBoxRequestObject) (gen.DeleteBoxResponseObject, error) {
	b, err := x.core.Box(req.ID)
	if err != nil {
		return nil, err
	}
	if err := x.core.Delete(b.ID); err != nil {
		return nil, err
	}
	return gen.DeleteBox200JSONResponse(wire.Message("Box deleted")), nil
}

// DeleteBoxes deletes the listed boxes. An empty list, or one with a blank
// id, is an error (it is never read as "all boxes"); so is an unknown id,
// in which case nothing is deleted.
func (x *Boxes) DeleteBoxes(ctx context.Context, req gen.DeleteBoxesRequestObject) (gen.DeleteBoxesResponseObject, error) {
	if req.Body == nil || len(req.Body.IDs) == 0 {
		return nil, errdefs.Invalid("ids must contain at least one box id")
	}
	var ids []string
	for _, id := range req.Body.IDs {
		if strings.TrimSpace(id) == "" {
			return nil, errdefs.Invalid("ids must not contain blank ids")
		}
		b, err := x.core.Box(id)
		if err != nil {
			if errors.Is(err, errdefs.ErrNotFound) {
				return nil, errdefs.NotFound("box not found: %s", id)
			}
			return nil, err
		}
		if !slices.Contains(ids, b.ID) {
			ids = append(ids, b.ID)
		}
	}
	for _, id := range ids {
		if err := x.core.Delete(id); err != nil {
			return nil, err
		}
	}
	return gen.DeleteBoxes200JSONResponse(wire.Message(fmt.Sprintf("%d boxes deleted", len(ids)))), nil
}

func (x *Boxes) GetBoxStatus(ctx context.Context, req gen.GetBoxStatusRequestObject) (gen.GetBoxStatusResponseObject, error) {
	b, err := x.core.Box(req.ID)
	if err != nil {
		return nil, err
	}
	return gen.GetBoxStatus200JSONResponse{Status: gen.BoxStatus(b.Status)}, nil
}

func (x *Boxes) PauseBox(ctx context.Context, req gen.PauseBoxRequestObject) (gen.PauseBoxResponseObject, error) {
	b, err := x.core.Box(req.ID)
	if err != nil {
		return nil, err
	}
	if b.KeepAlive {
		return nil, errdefs.Conflict("Keep-alive boxes cannot be paused")
	}
	if b.Status != "paused" {
		if err := x.core.Pause(ctx, b.ID); err != nil {
			return nil, err
		}
	}
	return gen.PauseBox200JSONResponse(wire.Message("Box paused")), nil
}

func (x *Boxes) ResumeBox(ctx context.Context, req gen.ResumeBoxRequestObject) (gen.ResumeBoxResponseObject, error) {
	b, err := x.core.Box(req.ID)
	if err != nil {
		return nil, err
	}
	if b.Status == "paused" {
		if err := x.core.Resume(ctx, b.ID); err != nil {
			return nil, err
		}
	}
	return gen.ResumeBox200JSONResponse(wire.Message("Box resumed")), nil
}

func (x *Boxes) GetBoxLogs(ctx context.Context, req gen.GetBoxLogsRequestObject) (gen.GetBoxLogsResponseObject, error) {
	b, err := x.core.Box(req.ID)
	if err != nil {
		return nil, err
	}
	offset, limit := wire.Deref(req.Params.Offset), wire.Deref(req.Params.Limit)
	if offset < 0 || limit < 0 {
		return nil, errdefs.Invalid("offset and limit must not be negative")
	}
	entries, err := x.db.Logs(b.ID, offset, limit)
	if err != nil {
		return nil, err
	}
	logs := make([]gen.LogEntry, len(entries))
	for i, e := range entries {
		logs[i] = gen.LogEntry{Timestamp: e.Timestamp, Level: gen.LogEntryLevel(e.Level), Source: gen.LogEntrySource(e.Source), Message: e.Message}
	}
	return gen.GetBoxLogs200JSONResponse{Logs: logs}, nil
}

func (x *Boxes) ListBoxRuns(ctx context.Context, req gen.ListBoxRunsRequestObject) (gen.ListBoxRunsResponseObject, error) {
	b, err := x.core.Box(req.ID)
	if err != nil {
		return nil, err
	}
	runs, err := x.db.Runs(b.ID)
	if err != nil {
		return nil, err
	}
	out := make([]gen.RunRecord, len(runs))
	for i, r := range runs {
		out[i] = wire.RunRecord(r)
	}
	return gen.ListBoxRuns200JSONResponse{Runs: out}, nil
}

func (x *Boxes) GetBoxRun(ctx context.Context, req gen.GetBoxRunRequestObject) (gen.GetBoxRunResponseObject, error) {
	b, err := x.core.Box(req.ID)
	if err != nil {
		return nil, err
	}
	r, err := x.db.Run(b.ID, req.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errdefs.NotFound("run not found")
	}
	if err != nil {
		return nil, err
	}
	return gen.GetBoxRun200JSONResponse{Status: gen.RunStatus(r.Status)}, nil
}

// Labels.

func (x *Boxes) AddLabel(ctx context.Context, req gen.AddLabelRequestObject) (gen.AddLabelResponseObject, error) {
	if req.Body == nil {
		return nil, errdefs.Invalid("label is required")
	}
	label := req.Body.Label
	var labels []string
	err := x.core.UpdateBox(req.ID, func(b *store.Box) error {
		if slices.Contains(b.Labels, label) {
			return errdefs.Conflict("Label already added")
		}
		next := append(slices.Clone(b.Labels), label)
		if err := validateLabels(next); err != nil {
			return err
		}
		b.Labels = next
		labels = next
		return nil
	})
	if err != nil {
		return nil, core.NotFoundAsBox(err)
	}
	return gen.AddLabel200JSONResponse{Message: wire.Ptr("Label added"), Labels: labels}, nil
}

func (x *Boxes) RemoveLabel(ctx context.Context, req gen.RemoveLabelRequestObject) (gen.RemoveLabelResponseObject, error) {
	labels := []string{}
	err := x.core.UpdateBox(req.ID, func(b *store.Box) error {
		i := slices.Index(b.Labels, req.Label)
		if i < 0 {
			return errdefs.NotFound("Label not found")
		}
		b.Labels = slices.Delete(slices.Clone(b.Labels), i, i+1)
		labels = append(labels, b.Labels...)
		return nil
	})
	if err != nil {
		return nil, core.NotFoundAsBox(err)
	}
	return gen.RemoveLabel200JSONResponse{Message: wire.Ptr("Label removed"), Labels: labels}, nil
}

// Skills. boxd cannot reach a skills registry: it records which skills are
// enabled (they are returned in enabled_skills) without fetching them.

var skillRE = regexp.MustCompile(`^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$`)

func (x *Boxes) AddSkill(ctx context.Context, req gen.AddSkillRequestObject) (gen.AddSkillResponseObject, error) {
	if req.Body == nil || !skillRE.MatchString(req.Body.SkillID) {
		return nil, errdefs.Invalid("Invalid skill_id format")
	}
	err := x.core.UpdateBox(req.ID, func(b *store.Box) error {
		if slices.Contains(b.Skills, req.Body.SkillID) {
			return errdefs.Conflict("Skill already enabled")
		}
		b.Skills = append(slices.Clone(b.Skills), req.Body.SkillID)
		return nil
	})
	if err != nil {
		return nil, core.NotFoundAsBox(err)
	}
	return gen.AddSkill200JSONResponse(wire.Message("Skill added")), nil
}

func (x *Boxes) RemoveSkill(ctx context.Context, req gen.RemoveSkillRequestObject) (gen.RemoveSkillResponseObject, error) {
	id := req.Owner + "/" + req.Repo + "/" + req.Skill
	err := x.core.UpdateBox(req.ID, func(b *store.Box) error {
		i := slices.Index(b.Skills, id)
		if i < 0 {
			return errdefs.NotFound("Skill not found")
		}
		b.Skills = slices.Delete(slices.Clone(b.Skills), i, i+1)
		return nil
	})
	if err != nil {
		return nil, core.NotFoundAsBox(err)
	}
	return gen.RemoveSkill200JSONResponse(wire.Message("Skill removed")), nil
}

// Account environment variables: set in every box created afterwards.

// withAccountEnv returns the account's environment variables overlaid
// with a new box's own; a box gets them once, at creation.
func (x *Boxes) withAccountEnv(own map[string]string) map[string]string {
	env, err := x.db.AccountEnv()
	if err != nil {
		x.core.Logger().Warn("cannot read account env", "err", err)
		env = map[string]string{}
	}
	for k, v := range own {
		env[k] = v
	}
	if len(env) == 0 {
		return nil
	}
	return env
}

// maskedValue is what ListEnv shows in place of every value.
const maskedValue = "****"

func (x *Boxes) ListEnv(ctx context.Context, req gen.ListEnvRequestObject) (gen.ListEnvResponseObject, error) {
	env, err := x.db.AccountEnv()
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(env))
	for k := range env {
		out[k] = maskedValue
	}
	return gen.ListEnv200JSONResponse{EnvVars: out}, nil
}

func validateEnv(env map[string]string) error {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !envKey.MatchString(k) {
			return errdefs.Invalid("%q is not a valid environment variable name", k)
		}
		if strings.IndexByte(env[k], 0) >= 0 {
			return errdefs.Invalid("the value of %s contains a NUL byte", k)
		}
	}
	return nil
}

func (x *Boxes) SetAllEnv(ctx context.Context, req gen.SetAllEnvRequestObject) (gen.SetAllEnvResponseObject, error) {
	if req.Body == nil {
		return nil, errdefs.Invalid("env_vars is required")
	}
	if err := validateEnv(req.Body.EnvVars); err != nil {
		return nil, err
	}
	if err := x.db.SetAccountEnv(req.Body.EnvVars); err != nil {
		return nil, err
	}
	return gen.SetAllEnv200JSONResponse(wire.Message("Environment variables replaced")), nil
}

func (x *Boxes) SetEnv(ctx context.Context, req gen.SetEnvRequestObject) (gen.SetEnvResponseObject, error) {
	if req.Body == nil {
		return nil, errdefs.Invalid("value is required")
	}
	if err := validateEnv(map[string]string{req.Key: req.Body.Value}); err != nil {
		return nil, err
	}
	if err := x.db.UpdateAccountEnv(func(env map[string]string) error {
		env[req.Key] = req.Body.Value
		return nil
	}); err != nil {
		return nil, err
	}
	return gen.SetEnv200JSONResponse(wire.Message("Environment variable set")), nil
}

func (x *Boxes) DeleteEnv(ctx context.Context, req gen.DeleteEnvRequestObject) (gen.DeleteEnvResponseObject, error) {
	err := x.db.UpdateAccountEnv(func(env map[string]string) error {
		if _, ok := env[req.Key]; !ok {
			return errdefs.NotFound("not found")
		}
		delete(env, req.Key)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return gen.DeleteEnv200JSONResponse(wire.Message("Environment variable deleted")), nil
}

// Init command, of any box (package core, initcmd.go). None of these wakes a paused
// box: they read and write its record, and a change reaches a frozen
// sandbox when it thaws.

func (x *Boxes) GetInitCommand(ctx context.Context, req gen.GetInitCommandRequestObject) (gen.GetInitCommandResponseObject, error) {
	b, err := x.core.Box(req.ID)
	if err != nil {
		return nil, err
	}
	return gen.GetInitCommand200JSONResponse{InitCommand: b.InitCommand}, nil
}

func (x *Boxes) SetInitCommand(ctx context.Context, req gen.SetInitCommandRequestObject) (gen.SetInitCommandResponseObject, error) {
	if req.Body == nil || strings.TrimSpace(req.Body.InitCommand) == "" {
		return nil, errdefs.Invalid("initCommand is required")
	}
	if err := validateInitCommand(req.Body.InitCommand); err != nil {
		return nil, err
	}
	b, err := x.core.Box(req.ID)
	if err != nil {
		return nil, err
	}
	if err := x.core.UpdateBox(b.ID, func(b *store.Box) error {
		b.InitCommand = req.Body.InitCommand
		return nil
	}); err != nil {
		return nil, err
	}
	x.core.InitChanged(b.ID)
	return gen.SetInitCommand200JSONResponse(wire.Message("Init command set")), nil
}

func (x *Boxes) DeleteInitCommand(ctx context.Context, req gen.DeleteInitCommandRequestObject) (gen.DeleteInitCommandResponseObject, error) {
	b, err := x.core.Box(req.ID)
	if err != nil {
		return nil, err
	}
	if err := x.core.UpdateBox(b.ID, func(b *store.Box) error {
		b.InitCommand = ""
		return nil
	}); err != nil {
		return nil, err
	}
	x.core.InitChanged(b.ID)
	return gen.DeleteInitCommand200JSONResponse(wire.Message("Init command deleted")), nil
}

// validateInitCommand checks an init command's length.
func validateInitCommand(cmd string) error {
	if len(cmd) > core.MaxInitCommand {
		return errdefs.Invalid("init_command is %d bytes long; at most %d (64 KiB) are allowed", len(cmd), core.MaxInitCommand)
	}
	return nil
}

// validateNetworkPolicy checks a policy from a request (see
// egress.Compile for the rules).
func validateNetworkPolicy(np *gen.NetworkPolicy) error {
	if _, err := egress.Compile(string(np.Mode), np.AllowedDomains, np.AllowedCidrs, np.DeniedCidrs); err != nil {
		return errdefs.Invalid("network_policy: %v", err)
	}
	return nil
}

// validateAttachHeaders checks attach_headers from a request. The error
// never quotes a header value.
func validateAttachHeaders(h map[string]map[string]string) error {
	if _, err := egress.CompileHeaders(h); err != nil {
		return errdefs.Invalid("attach_headers: %v", err)
	}
	return nil
}

// UpdateNetworkPolicy replaces a box's policy. It applies at once: new
// connections are checked against it, and open ones it no longer allows
// are closed.
func (x *Boxes) UpdateNetworkPolicy(ctx context.Context, req gen.UpdateNetworkPolicyRequestObject) (gen.UpdateNetworkPolicyResponseObject, error) {
	if req.Body == nil {
		return nil, errdefs.Invalid("request body is required")
	}
	np := *req.Body
	if err := validateNetworkPolicy(&np); err != nil {
		return nil, err
	}
	b, err := x.core.Box(req.ID)
	if err != nil {
		return nil, err
	}
	if err := x.core.UpdateBox(b.ID, func(x *store.Box) error {
		x.NetworkPolicy = wire.Raw(np)
		return nil
	}); err != nil {
		return nil, err
	}
	x.cfg.PolicyChanged(b.ID)
	x.core.Logf(b.ID, "info", "system", "network policy set to "+string(np.Mode))
	return gen.UpdateNetworkPolicy200JSONResponse(wire.Message("Network policy updated")), nil
}
