// Package webhook delivers boxd's webhooks: the result of an agent run or
// of a schedule's run, POSTed as JSON to the caller's URL. It owns the
// HTTP client and the retries, and touches nothing else; a delivery that
// fails is said in the box's log through the func it is given.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Sender POSTs webhooks.
type Sender struct {
	ctx    context.Context
	client *http.Client
	logf   func(boxID, level, source, msg string)
}

// New returns a Sender whose deliveries end with ctx, and which says in a
// box's log, with logf, why a delivery failed.
func New(ctx context.Context, logf func(boxID, level, source, msg string)) *Sender {
	return &Sender{ctx: ctx, client: &http.Client{Timeout: 30 * time.Second}, logf: logf}
}

// Deliver POSTs payload, as JSON, to url with headers for box boxID,
// trying a few times on connection errors and 5xx. Header values are
// never logged.
func (s *Sender) Deliver(boxID, url string, headers map[string]string, payload any) {
	body, _ := json.Marshal(payload)
	var last string
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 500 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			cancel()
			last = "invalid webhook URL"
			break
		}
		req.Header.Set("Content-Type", "application/json")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := s.client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
		}
		cancel()
		if err == nil && resp.StatusCode < 500 {
			if resp.StatusCode >= 300 {
				last = fmt.Sprintf("webhook answered %d", resp.StatusCode)
				break
			}
			return
		}
		if err != nil {
			last = "webhook delivery failed: " + errors.Unwrap(err).Error()
		} else {
			last = fmt.Sprintf("webhook answered %d", resp.StatusCode)
		}
	}
	s.logf(boxID, "warn", "system", last)
}
