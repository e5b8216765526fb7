package backend

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/local"
)

func TestChoose(t *testing.T) {
	unsupported := fmt.Errorf("%w; on plan9, set …", local.ErrUnsupportedOS)
	noBwrap := errors.New("bubblewrap is not installed")
	for _, tc := range []struct {
		name     string
		env      map[string]string
		embedErr error
		want     Kind
		wantErr  error  // errors.Is
		errHas   string // in the message, besides
	}{
		{name: "nothing set", want: Embedded},
		{name: "nothing set, no bubblewrap", embedErr: noBwrap, want: Embedded},
		{name: "nothing set, not Linux", embedErr: unsupported, wantErr: ErrNoBackend, errHas: "set UPSTASH_BOX_BASE_URL and UPSTASH_BOX_API_KEY for a boxd on a Linux machine or VM, or UPSTASH_BOX_API_KEY alone for the Upstash Box cloud"},
		{name: "a key", env: map[string]string{envAPIKey: "k"}, embedErr: unsupported, want: Cloud},
		{name: "a key and boxd's URL", env: map[string]string{envAPIKey: "k", envBaseURL: "http://10.0.0.5:8989"}, embedErr: unsupported, want: Boxd},
		{name: "a key and a local boxd", env: map[string]string{envAPIKey: "k", envBaseURL: "http://127.0.0.1:8989/"}, want: Boxd},
		{name: "a key and the cloud's URL", env: map[string]string{envAPIKey: "k", envBaseURL: box.DefaultBaseURL}, want: Cloud},
		{name: "a key and another region", env: map[string]string{envAPIKey: "k", envBaseURL: "https://EU-central-1.box.upstash.com/"}, want: Cloud},
		{name: "a host that only ends like the cloud's", env: map[string]string{envAPIKey: "k", envBaseURL: "https://notupstash.com"}, want: Boxd},
		{name: "the cloud's name inside another host", env: map[string]string{envAPIKey: "k", envBaseURL: "https://box.upstash.com.example.net"}, want: Boxd},
		{name: "a URL without its key", env: map[string]string{envBaseURL: "http://10.0.0.5:8989"}, errHas: "UPSTASH_BOX_BASE_URL is set but UPSTASH_BOX_API_KEY is not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checked := false
			got, err := choose(func(k string) string { return tc.env[k] }, func() error { checked = true; return tc.embedErr })
			if tc.wantErr != nil || tc.errHas != "" {
				if err == nil {
					t.Fatalf("choose = %v, want an error", got)
				}
				if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Errorf("choose: %v, want %v", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.errHas) {
					t.Errorf("choose: %q, want it to say %q", err, tc.errHas)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("choose = %v, %v, want %v", got, err, tc.want)
			}
			if checked != (got == Embedded) {
				t.Errorf("the embedded boxd was checked: %v, for %v", checked, got)
			}
		})
	}
}

// TestConnectBoxd points UPSTASH_BOX_BASE_URL and UPSTASH_BOX_API_KEY at
// a boxd running in the test: Connect says it is a boxd, not the cloud,
// and its client reaches that boxd.
func TestConnectBoxd(t *testing.T) {
	const key = "backend-test-key"
	srv, err := local.New(local.Config{DataDir: t.TempDir(), APIKey: key, Isolation: local.IsolationNone, Root: local.RootHost})
	if errors.Is(err, local.ErrUnsupportedOS) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv}
	go func() { _ = hs.Serve(l) }()
	defer hs.Close()
	base := "http://" + l.Addr().String()
	t.Setenv(envBaseURL, base)
	t.Setenv(envAPIKey, key)
	t.Setenv("UPSTASH_DISABLE_TELEMETRY", "1")

	be, err := Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if be.Kind != Boxd || be.Client.BaseURL() != base {
		t.Fatalf("Connect = %v at %s, want boxd at %s", be.Kind, be.Client.BaseURL(), base)
	}
	if _, err := be.Client.List(t.Context(), nil); err != nil {
		t.Errorf("the client of Connect: %v", err)
	}
}
