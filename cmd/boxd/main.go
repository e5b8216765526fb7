// Command boxd is a local backend for the Upstash Box API: it runs real
// sandboxes (bubblewrap) on this machine, so that the Box SDKs, their
// examples and tests work with no cloud account and no network.
//
// Usage:
//
//	boxd [-addr 127.0.0.1:8989] [-data DIR] [-api-key-file FILE] [-isolation bwrap|none]
//	     [-allow-host-loopback] [-github-url https://github.com] [-github-api-url URL]
//
// The API key comes from the file given with -api-key-file, else from
// $UPSTASH_BOX_API_KEY; without either boxd makes one and prints it.
// -api-key KEY works too, but puts the key where every user of the
// machine sees it (ps), and boxd says so.
//
// Point an SDK at it with UPSTASH_BOX_BASE_URL=http://127.0.0.1:8989 and
// UPSTASH_BOX_API_KEY set to the same key.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/upstash/box-go/local"
)

func main() {
	if err := run(); err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "boxd:") {
			msg = "boxd: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}

func run() error {
	defaultData := filepath.Join(os.TempDir(), "boxd")
	if d, err := os.UserCacheDir(); err == nil {
		defaultData = filepath.Join(d, "boxd")
	}
	addr := flag.String("addr", "127.0.0.1:8989", "address to listen on")
	data := flag.String("data", defaultData, "state directory (database and box files)")
	apiKey := flag.String("api-key", "", "API key clients must send; visible to every user of this machine, prefer -api-key-file or $UPSTASH_BOX_API_KEY")
	apiKeyFile := flag.String("api-key-file", "", "file holding the API key clients must send (default: $UPSTASH_BOX_API_KEY, or a random key that is printed)")
	isolation := flag.String("isolation", local.IsolationBwrap, "box isolation: bwrap, or none (no isolation at all)")
	githubURL := flag.String("github-url", "https://github.com", "GitHub for git clone of owner/repo, the box's git token, pull requests and issues")
	githubAPIURL := flag.String("github-api-url", "", "GitHub REST API (default https://api.github.com, or {github-url}/api/v3 for another -github-url)")
	hostLoopback := flag.Bool("allow-host-loopback", false, "let boxes reach services on this machine's loopback (127.0.0.1, host.boxd.internal) where their network policy allows; boxd's own API stays out of reach")
	verbose := flag.Bool("v", false, "log debug messages")
	flag.Parse()

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	key, err := apiKeyFrom(*apiKey, *apiKeyFile, log)
	if err != nil {
		return err
	}
	generated := false
	if key == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		key = "box_local_" + hex.EncodeToString(b[:])
		generated = true
	}
	// Signals are handled from here on, so that boxd always shuts down
	// cleanly once it has said it is listening.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := local.New(local.Config{DataDir: *data, APIKey: key, Isolation: *isolation, Logger: log, GitHubURL: *githubURL, GitHubAPIURL: *githubAPIURL, AllowHostLoopback: *hostLoopback})
	if err != nil {
		return err
	}
	defer srv.Close()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	url := "http://" + l.Addr().String()
	fmt.Printf("boxd listening on %s (data %s, isolation %s)\n", url, *data, *isolation)
	if generated {
		fmt.Printf("API key: %s\n", key)
	}
	fmt.Printf("export UPSTASH_BOX_BASE_URL=%s\n", url)
	return srv.Serve(ctx, l)
}

// apiKeyFrom returns the API key: from the file, from the flag (with a
// warning), or from $UPSTASH_BOX_API_KEY; "" when none is given.
func apiKeyFrom(flagKey, file string, log *slog.Logger) (string, error) {
	switch {
	case flagKey != "" && file != "":
		return "", errors.New("give -api-key or -api-key-file, not both")
	case file != "":
		fi, err := os.Stat(file)
		if err != nil {
			return "", fmt.Errorf("-api-key-file: %w", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			log.Warn("the API key file can be read by other users of this machine; chmod 600 it", "file", file)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("-api-key-file: %w", err)
		}
		key := strings.TrimSpace(string(b))
		if key == "" || strings.ContainsAny(key, "\r\n") {
			return "", fmt.Errorf("-api-key-file: %s must hold the key alone, on one line", file)
		}
		return key, nil
	case flagKey != "":
		log.Warn("the API key given with -api-key is visible to every user of this machine (ps); give it in $UPSTASH_BOX_API_KEY or with -api-key-file")
		return flagKey, nil
	}
	return os.Getenv("UPSTASH_BOX_API_KEY"), nil
}
