package box_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// TestBearerTokenAgainstBoxd checks that a client with WithBearerToken
// works against boxd, which takes its API key as a bearer token: REST
// calls and the WebSocket handshake of an exec session carry it. A wrong
// token is a 401 that does not repeat it.
func TestBearerTokenAgainstBoxd(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	ctx := t.Context()
	c, err := srv.Client().Clone(box.WithBearerToken(srv.APIKey()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Create(ctx, nil)
	if err != nil {
		t.Fatalf("Create with a bearer token: %v", err)
	}
	if err := b.Files.WriteText(ctx, "hello.txt", "hello\n"); err != nil {
		t.Fatalf("Files.WriteText with a bearer token: %v", err)
	}
	run, err := b.Exec.Command(ctx, "cat hello.txt")
	if err != nil || run.Stdout != "hello\n" {
		t.Fatalf("Exec.Command with a bearer token = %+v, %v", run, err)
	}
	s, err := b.Exec.Session(ctx, &box.SessionParams{Cmd: "exit 7"})
	if err != nil {
		t.Fatalf("Exec.Session with a bearer token: %v", err)
	}
	if code, err := s.Wait(ctx); err != nil || code != 7 {
		t.Errorf("session Wait = %d, %v; want 7", code, err)
	}
	_ = s.Close()

	const wrong = "box_not_the_key_s3cr3t"
	bad, err := c.Clone(box.WithBearerToken(wrong))
	if err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"Get":     errOnly(bad.Get(ctx, b.ID(), nil)),
		"Session": errOnly(b.Exec.Session(ctx, &box.SessionParams{Cmd: "true"}, box.WithBearerToken(wrong))),
	} {
		var ae *box.Error
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s with a wrong bearer token = %v, want a 401 *box.Error", what, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: the error repeats the token: %v", what, err)
		}
	}
}

// errOnly keeps the error of a call that also returns a value.
func errOnly[T any](_ T, err error) error { return err }
