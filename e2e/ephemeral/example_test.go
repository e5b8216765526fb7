//go:build linux

// Examples run against an embedded boxd, which runs boxes only on Linux;
// an Example cannot skip, so elsewhere this file is left out.

package ephemeral_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/ephemeral"
	"github.com/upstash/box-go/local"
)

// exampleClient starts a local boxd for an example and returns a client
// for it. Real programs call box.NewClient() and reach the cloud.
func exampleClient() (*box.Client, func()) {
	dir, err := os.MkdirTemp("", "ephemeral-example-")
	if err != nil {
		log.Fatal(err)
	}
	isolation := local.IsolationBwrap
	if local.CheckIsolation() != nil {
		isolation = local.IsolationNone
	}
	srv, err := local.New(local.Config{DataDir: dir, APIKey: "example-key", Isolation: isolation})
	if err != nil {
		log.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	c, err := box.NewClient(box.WithAPIKey("example-key"), box.WithBaseURL(ts.URL))
	if err != nil {
		log.Fatal(err)
	}
	return c, func() { ts.Close(); srv.Close(); os.RemoveAll(dir) }
}

func ExampleCreate() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()

	eb, err := ephemeral.Create(ctx, client, &ephemeral.CreateParams{TTL: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	defer eb.Delete(ctx)
	fmt.Println("expires in about", time.Until(eb.ExpiresAt()).Round(time.Hour))

	run, err := eb.Exec.Command(ctx, "echo hello")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(run.Stdout)
	// Output:
	// expires in about 1h0m0s
	// hello
}
