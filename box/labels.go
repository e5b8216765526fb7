package box

import (
	"context"
	"regexp"
	"strings"

	"github.com/upstash/box-go/gen"
)

// Labels manages a box's labels.
type Labels struct{ b *Box }

// Add adds a label and returns the box's labels. Labels are 1 to 20
// characters from letters, digits and . _ - :, at most 5 per box.
func (l *Labels) Add(ctx context.Context, label string, opts ...Option) ([]string, error) {
	ctx = withCallOptions(ctx, opts)
	if err := ValidateLabel(label); err != nil {
		return nil, err
	}
	r, err := call[gen.LabelsResponse](l.b.c.api.AddLabel(ctx, l.b.id, gen.LabelRequest{Label: label}))
	if err != nil {
		return nil, err
	}
	l.set(r.Labels)
	return r.Labels, nil
}

// Remove removes a label and returns the box's labels.
func (l *Labels) Remove(ctx context.Context, label string, opts ...Option) ([]string, error) {
	ctx = withCallOptions(ctx, opts)
	if label == "" {
		return nil, invalidf("box: label is required")
	}
	// The generated client escapes the label (env:prod → env%3Aprod).
	r, err := call[gen.LabelsResponse](l.b.c.api.RemoveLabel(ctx, l.b.id, label))
	if err != nil {
		return nil, err
	}
	l.set(r.Labels)
	return r.Labels, nil
}

// List returns the box's labels, as the server reports them now.
func (l *Labels) List(ctx context.Context, opts ...Option) ([]string, error) {
	ctx = withCallOptions(ctx, opts)
	in, err := l.b.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	return in.Labels, nil
}

func (l *Labels) set(labels []string) {
	if labels == nil {
		labels = []string{}
	}
	l.b.st.mu.Lock()
	l.b.st.info.Labels = labels
	l.b.st.mu.Unlock()
}

// Skills manages the agent skills enabled in a box.
type Skills struct{ b *Box }

var skillRE = regexp.MustCompile(`^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$`)

func checkSkill(id string) error {
	if !skillRE.MatchString(id) {
		return invalidf("box: skill id %q must look like owner/repo/skill-name", id)
	}
	return nil
}

// Add enables a skill, given as owner/repo/skill-name.
func (s *Skills) Add(ctx context.Context, skillID string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := checkSkill(skillID); err != nil {
		return err
	}
	return none(s.b.c.api.AddSkill(ctx, s.b.id, gen.SkillRequest{SkillID: skillID}))
}

// Remove disables a skill.
func (s *Skills) Remove(ctx context.Context, skillID string, opts ...Option) error {
	ctx = withCallOptions(ctx, opts)
	if err := checkSkill(skillID); err != nil {
		return err
	}
	parts := strings.SplitN(skillID, "/", 3)
	return none(s.b.c.api.RemoveSkill(ctx, s.b.id, parts[0], parts[1], parts[2]))
}

// List returns the enabled skills, as the server reports them now.
func (s *Skills) List(ctx context.Context, opts ...Option) ([]string, error) {
	ctx = withCallOptions(ctx, opts)
	in, err := s.b.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	return in.EnabledSkills, nil
}
