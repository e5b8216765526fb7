package local

import (
	"context"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/core"
	"github.com/upstash/box-go/local/internal/errdefs"
	"github.com/upstash/box-go/local/internal/store"
	"github.com/upstash/box-go/local/internal/wire"
)

// Labels.

func (c *controlPlane) AddLabel(ctx context.Context, req gen.AddLabelRequestObject) (gen.AddLabelResponseObject, error) {
	if req.Body == nil {
		return nil, errdefs.Invalid("label is required")
	}
	label := req.Body.Label
	var labels []string
	err := c.s.core.UpdateBox(req.ID, func(b *store.Box) error {
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

func (c *controlPlane) RemoveLabel(ctx context.Context, req gen.RemoveLabelRequestObject) (gen.RemoveLabelResponseObject, error) {
	labels := []string{}
	err := c.s.core.UpdateBox(req.ID, func(b *store.Box) error {
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

func (c *controlPlane) AddSkill(ctx context.Context, req gen.AddSkillRequestObject) (gen.AddSkillResponseObject, error) {
	if req.Body == nil || !skillRE.MatchString(req.Body.SkillID) {
		return nil, errdefs.Invalid("Invalid skill_id format")
	}
	err := c.s.core.UpdateBox(req.ID, func(b *store.Box) error {
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

func (c *controlPlane) RemoveSkill(ctx context.Context, req gen.RemoveSkillRequestObject) (gen.RemoveSkillResponseObject, error) {
	id := req.Owner + "/" + req.Repo + "/" + req.Skill
	err := c.s.core.UpdateBox(req.ID, func(b *store.Box) error {
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
func (s *Server) withAccountEnv(own map[string]string) map[string]string {
	env, err := s.db.AccountEnv()
	if err != nil {
		s.log.Warn("cannot read account env", "err", err)
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

func (c *controlPlane) ListEnv(ctx context.Context, req gen.ListEnvRequestObject) (gen.ListEnvResponseObject, error) {
	env, err := c.s.db.AccountEnv()
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

func (c *controlPlane) SetAllEnv(ctx context.Context, req gen.SetAllEnvRequestObject) (gen.SetAllEnvResponseObject, error) {
	if req.Body == nil {
		return nil, errdefs.Invalid("env_vars is required")
	}
	if err := validateEnv(req.Body.EnvVars); err != nil {
		return nil, err
	}
	if err := c.s.db.SetAccountEnv(req.Body.EnvVars); err != nil {
		return nil, err
	}
	return gen.SetAllEnv200JSONResponse(wire.Message("Environment variables replaced")), nil
}

func (c *controlPlane) SetEnv(ctx context.Context, req gen.SetEnvRequestObject) (gen.SetEnvResponseObject, error) {
	if req.Body == nil {
		return nil, errdefs.Invalid("value is required")
	}
	if err := validateEnv(map[string]string{req.Key: req.Body.Value}); err != nil {
		return nil, err
	}
	if err := c.s.db.UpdateAccountEnv(func(env map[string]string) error {
		env[req.Key] = req.Body.Value
		return nil
	}); err != nil {
		return nil, err
	}
	return gen.SetEnv200JSONResponse(wire.Message("Environment variable set")), nil
}

func (c *controlPlane) DeleteEnv(ctx context.Context, req gen.DeleteEnvRequestObject) (gen.DeleteEnvResponseObject, error) {
	err := c.s.db.UpdateAccountEnv(func(env map[string]string) error {
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

// Init command, of any box (initcmd.go). None of these wakes a paused
// box: they read and write its record, and a change reaches a frozen
// sandbox when it thaws.

func (c *controlPlane) GetInitCommand(ctx context.Context, req gen.GetInitCommandRequestObject) (gen.GetInitCommandResponseObject, error) {
	b, err := c.box(req.ID)
	if err != nil {
		return nil, err
	}
	return gen.GetInitCommand200JSONResponse{InitCommand: b.InitCommand}, nil
}

func (c *controlPlane) SetInitCommand(ctx context.Context, req gen.SetInitCommandRequestObject) (gen.SetInitCommandResponseObject, error) {
	if req.Body == nil || strings.TrimSpace(req.Body.InitCommand) == "" {
		return nil, errdefs.Invalid("initCommand is required")
	}
	if err := validateInitCommand(req.Body.InitCommand); err != nil {
		return nil, err
	}
	b, err := c.box(req.ID)
	if err != nil {
		return nil, err
	}
	if err := c.s.core.UpdateBox(b.ID, func(b *store.Box) error {
		b.InitCommand = req.Body.InitCommand
		return nil
	}); err != nil {
		return nil, err
	}
	c.s.core.InitChanged(b.ID)
	return gen.SetInitCommand200JSONResponse(wire.Message("Init command set")), nil
}

func (c *controlPlane) DeleteInitCommand(ctx context.Context, req gen.DeleteInitCommandRequestObject) (gen.DeleteInitCommandResponseObject, error) {
	b, err := c.box(req.ID)
	if err != nil {
		return nil, err
	}
	if err := c.s.core.UpdateBox(b.ID, func(b *store.Box) error {
		b.InitCommand = ""
		return nil
	}); err != nil {
		return nil, err
	}
	c.s.core.InitChanged(b.ID)
	return gen.DeleteInitCommand200JSONResponse(wire.Message("Init command deleted")), nil
}

// validateInitCommand checks an init command's length.
func validateInitCommand(cmd string) error {
	if len(cmd) > core.MaxInitCommand {
		return errdefs.Invalid("init_command is %d bytes long; at most %d (64 KiB) are allowed", len(cmd), core.MaxInitCommand)
	}
	return nil
}
