// Package backend picks where the examples run: the Upstash Box cloud when
// UPSTASH_BOX_API_KEY is set, otherwise boxd, the local backend, started
// inside the example's own process.
package backend

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/local"
)

// Connect returns a client and a function that releases what Connect
// started. It prints which backend it uses.
func Connect(ctx context.Context) (*box.Client, func(), error) {
	if os.Getenv("UPSTASH_BOX_API_KEY") != "" {
		c, err := box.NewClient()
		if err != nil {
			return nil, nil, err
		}
		fmt.Printf("backend: Upstash Box at %s\n", c.BaseURL())
		return c, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "boxd-example-")
	if err != nil {
		return nil, nil, err
	}
	isolation := local.IsolationBwrap
	if err := local.CheckIsolation(); errors.Is(err, local.ErrUnsupportedOS) {
		os.RemoveAll(dir)
		return nil, nil, err
	} else if err != nil {
		fmt.Printf("backend: %v; running boxes WITHOUT isolation\n", err)
		isolation = local.IsolationNone
	}
	var k [16]byte
	_, _ = rand.Read(k[:])
	key := hex.EncodeToString(k[:])
	srv, err := local.New(local.Config{DataDir: dir, APIKey: key, Isolation: isolation, AllowHostLoopback: true, Root: local.RootHost})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		os.RemoveAll(dir)
		return nil, nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(sctx, l); close(done) }()
	url := "http://" + l.Addr().String()
	c, err := box.NewClient(box.WithAPIKey(key), box.WithBaseURL(url), box.WithTelemetry(false))
	if err != nil {
		cancel()
		<-done
		srv.Close()
		os.RemoveAll(dir)
		return nil, nil, err
	}
	fmt.Printf("backend: embedded boxd at %s (isolation %s); set UPSTASH_BOX_API_KEY to use the cloud\n", url, isolation)
	stop := func() {
		cancel()
		<-done
		srv.Close()
		os.RemoveAll(dir)
	}
	return c, stop, nil
}
