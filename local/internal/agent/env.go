package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"strings"
)

// EnvPath is the agent's internal route by which boxd replaces the box's
// environment overlay (Config.Env) of a sandbox that is already running:
// a sandbox boxd started ahead of time, from its warm pool, which a new box
// claims. Processes started after the answer get the new environment. It
// is not part of the public API; boxd never proxies client requests to it.
const EnvPath = "/internal/env"

// maxEnvBody bounds an EnvPath request.
const maxEnvBody = 4 << 20

// serveEnv replaces the environment overlay.
func (a *Agent) serveEnv(w http.ResponseWriter, r *http.Request) {
	var env map[string]string
	if err := json.NewDecoder(io.LimitReader(r.Body, maxEnvBody)).Decode(&env); err != nil {
		writeError(w, http.StatusBadRequest, "bad environment: "+err.Error())
		return
	}
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			writeError(w, http.StatusBadRequest, "bad environment variable name or value")
			return
		}
	}
	a.envMu.Lock()
	a.cfg.Env = maps.Clone(env)
	a.envMu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// SetEnv replaces the environment overlay of the box's processes
// (EnvPath): what the box's record holds, account env included.
func (c *Client) SetEnv(ctx context.Context, env map[string]string) error {
	raw, err := json.Marshal(env)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://box"+EnvPath, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.do(req, http.StatusNoContent)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}
