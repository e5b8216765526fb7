// Package wire holds the small helpers that boxd's operations share to
// build the API's generated types (package gen): pointers to optional
// fields, messages, raw JSON and the records every feature returns. It
// holds no logic and chooses no status.
package wire

import (
	"encoding/json"

	"github.com/upstash/box-go/gen"
	"github.com/upstash/box-go/local/internal/store"
)

// CustomerID is the account boxd reports records under.
const CustomerID = "local"

// Ptr returns a pointer to v.
func Ptr[T any](v T) *T { return &v }

// Deref returns *p, or the zero value when p is nil.
func Deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// DerefOr returns *p, or def when p is nil.
func DerefOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// NonEmpty returns a pointer to s, or nil for "".
func NonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Message is the API's {"message": m}.
func Message(m string) gen.MessageResponse { return gen.MessageResponse{Message: &m} }

// Raw is v as JSON, or nil for nil.
func Raw(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, _ := json.Marshal(v)
	return b
}

// RunRecord is run r as the API shows it.
func RunRecord(r *store.Run) gen.RunRecord {
	rec := gen.RunRecord{
		ID:           r.ID,
		BoxID:        r.BoxID,
		CustomerID:   CustomerID,
		Type:         gen.RunRecordType(r.Type),
		Status:       gen.RunStatus(r.Status),
		InputTokens:  r.InputTokens,
		OutputTokens: r.OutputTokens,
		CostUSD:      r.CostUSD,
		DurationMs:   r.DurationMs,
		CreatedAt:    r.CreatedAt,
		CPUNs:        Ptr(r.CPUNs),
	}
	set := func(dst **string, v string) {
		if v != "" {
			*dst = Ptr(v)
		}
	}
	set(&rec.Prompt, r.Prompt)
	set(&rec.Model, r.Model)
	set(&rec.Output, r.Output)
	set(&rec.ErrorMessage, r.ErrorMessage)
	set(&rec.SessionID, r.SessionID)
	set(&rec.ScheduleID, r.ScheduleID)
	if r.CompletedAt != 0 {
		rec.CompletedAt = Ptr(r.CompletedAt)
	}
	if r.CachedTokens != 0 {
		rec.CachedInputTokens = Ptr(r.CachedTokens)
	}
	if r.MemoryPeak != 0 {
		rec.MemoryPeakBytes = Ptr(r.MemoryPeak)
	}
	rec.ComputeCostUSD = Ptr(0.0)
	return rec
}

// BoxData is box b as the API shows it.
func BoxData(b *store.Box) gen.BoxData {
	d := gen.BoxData{
		ID:            b.ID,
		Status:        gen.BoxStatus(b.Status),
		Labels:        b.Labels,
		EnabledSkills: b.Skills,
		CreatedAt:     b.CreatedAt,
		UpdatedAt:     b.UpdatedAt,
		CustomerID:    Ptr(CustomerID),
		KeepAlive:     Ptr(b.KeepAlive),
		Size:          Ptr(gen.BoxSize(b.Size)),
	}
	if d.Labels == nil {
		d.Labels = []string{}
	}
	if b.Name != "" {
		d.Name = Ptr(b.Name)
	}
	if b.Model != "" {
		d.Model = Ptr(b.Model)
	}
	if b.Agent != "" {
		d.Agent = Ptr(b.Agent)
	}
	if b.Runtime != "" {
		d.Runtime = Ptr(b.Runtime)
	}
	np := gen.NetworkPolicy{Mode: gen.NetworkPolicyModeAllowAll}
	if len(b.NetworkPolicy) > 0 {
		_ = json.Unmarshal(b.NetworkPolicy, &np)
	}
	d.NetworkPolicy = &np
	if b.Ephemeral {
		d.Ephemeral = Ptr(true)
		d.ExpiresAt = Ptr(b.ExpiresAt)
	}
	if b.Browser {
		d.Browser = Ptr(true)
	}
	if b.Desktop {
		d.Desktop = Ptr(true)
	}
	if b.LastActivity != 0 {
		d.LastActivityAt = Ptr(b.LastActivity)
	}
	if b.SessionID != "" {
		d.SessionID = Ptr(b.SessionID)
	}
	if b.TotalPrompts != 0 {
		d.TotalPrompts = Ptr(b.TotalPrompts)
		d.TotalInputTokens = Ptr(b.TotalInputTokens)
		d.TotalOutputTokens = Ptr(b.TotalOutputTokens)
		d.TotalTokenCostUSD = Ptr(b.TotalTokenCostUSD)
	}
	if b.TotalCPUNs != 0 {
		d.TotalCPUNs = Ptr(b.TotalCPUNs)
	}
	return d
}
