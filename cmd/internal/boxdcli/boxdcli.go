// Package boxdcli is boxd's command line: cmd/boxd runs it, and so does
// `box serve`, so that one binary gives a user both the client and the
// local backend.
package boxdcli

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/upstash/box-go/local"
)

// Main runs boxd with args (without the program name) until it is told
// to stop (SIGINT, SIGTERM), printing to stdout what a user needs to
// connect and its log to stderr. It returns the process's exit code.
func Main(name string, args []string, stdout, stderr io.Writer) int {
	if err := run(name, args, stdout, stderr); err != nil {
		var ue usageError
		switch {
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &ue):
			return 2 // the flag package has said what is wrong
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "boxd:") {
			msg = "boxd: " + msg
		}
		fmt.Fprintln(stderr, msg)
		return 1
	}
	return 0
}

func run(name string, args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet(name, flag.ContinueOnError)
	fl.SetOutput(stderr)
	defaultData := filepath.Join(os.TempDir(), "boxd")
	if d, err := os.UserCacheDir(); err == nil {
		defaultData = filepath.Join(d, "boxd")
	}
	addr := fl.String("addr", "127.0.0.1:8989", "address to listen on")
	data := fl.String("data", defaultData, "state directory (database and box files)")
	apiKey := fl.String("api-key", "", "API key clients must send; visible to every user of this machine, prefer -api-key-file or $UPSTASH_BOX_API_KEY")
	apiKeyFile := fl.String("api-key-file", "", "file holding the API key clients must send (default: $UPSTASH_BOX_API_KEY, or a random key that is printed)")
	isolation := fl.String("isolation", local.IsolationBwrap, "box isolation: bwrap, or none (no isolation at all)")
	githubURL := fl.String("github-url", "https://github.com", "GitHub for git clone of owner/repo, the box's git token, pull requests and issues")
	githubAPIURL := fl.String("github-api-url", "", "GitHub REST API (default https://api.github.com, or {github-url}/api/v3 for another -github-url)")
	hostLoopback := fl.Bool("allow-host-loopback", false, "let boxes reach services on this machine (its loopback, 127.0.0.1 or host.boxd.internal, and the addresses of its network interfaces) where their network policy allows the address (a name in allowed_domains leads there only as host.boxd.internal or where allowed_cidrs cover it); off by default; boxd's own API and SSH server stay out of reach either way")
	providers := map[string]string{}
	fl.Func("model-provider-url", "the base URL of a model provider, as `provider=URL`, for the agent CLIs and the browser's AI operations, e.g. anthropic=https://llm.internal or openai=http://127.0.0.1:4000/v1 (repeatable; providers: anthropic, openai, openrouter, vercel; a loopback URL reaches boxes as host.boxd.internal)", pairInto(providers, "provider", "URL"))
	sshAddr := fl.String("ssh-addr", "", "address to serve SSH on (ssh <box-id>@host -p port, the API key as the password, or a key added with box ssh-key add); off when empty")
	sshKeys := fl.String("ssh-authorized-keys", "", "an OpenSSH authorized_keys `file` whose keys log in over SSH to any box, as the API key does; read again when it changes (lines with options are skipped)")
	idlePause := fl.Duration("idle-pause", local.DefaultIdlePause, "pause a box that is not keep-alive after this long without use (0: never); the next call wakes it")
	root := fl.String("root", local.RootImage, "what a box's root is: image (its runtime's OCI image, pulled into -data once) or host (the host's /usr read-only, no images, works offline)")
	images := map[string]string{}
	fl.Func("image", "the OCI image of a runtime, as `runtime=ref`, e.g. python=registry.internal/python:3.13 (repeatable; defaults: the official images, node=docker.io/library/node:lts …)", pairInto(images, "runtime", "ref"))
	prune := fl.Bool("prune-images", false, "at start, remove the runtime images that no box runs")
	minFree := int64(local.DefaultMinFreeDisk)
	fl.Func("min-free-disk", "free space to keep on -data's file system (`size`: 512M, 2G; 0: no check); below it new boxes and snapshots are refused (default 256M)", func(v string) error {
		n, err := parseSize(v)
		if err != nil {
			return err
		}
		minFree = n
		return nil
	})
	maxImage := int64(local.DefaultMaxImageSize)
	fl.Func("max-image-size", "the most a runtime image may unpack to (`size`: 16G, 40G; 0: no bound); a create whose image is larger fails (default 16G)", func(v string) error {
		n, err := parseSize(v)
		if err != nil {
			return err
		}
		maxImage = n
		return nil
	})
	warmPool := fl.Int("warm-pool", local.DefaultWarmPool, "how many sandboxes to keep started ahead of creates, for each root and size that creates use (0: none); a create claims one instead of starting one")
	verbose := fl.Bool("v", false, "log debug messages")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", name, fl.Arg(0))
		fl.Usage()
		return usageError{fmt.Errorf("unexpected argument %q", fl.Arg(0))}
	}

	idle := *idlePause
	switch {
	case idle < 0:
		fmt.Fprintf(stderr, "%s: -idle-pause must not be negative\n", name)
		return usageError{errors.New("-idle-pause must not be negative")}
	case idle == 0:
		idle = -1 // never
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	key, err := apiKeyFrom(*apiKey, *apiKeyFile, log)
	if err != nil {
		return err
	}
	keptIn := ""
	if key == "" {
		if key, keptIn, err = keptKey(*data); err != nil {
			return err
		}
	}
	// Signals are handled from here on, so that boxd always shuts down
	// cleanly once it has said it is listening.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, l, err := local.Listen(local.Config{DataDir: *data, APIKey: key, Isolation: *isolation, Logger: log, GitHubURL: *githubURL, GitHubAPIURL: *githubAPIURL, AllowHostLoopback: *hostLoopback, ModelProviderURLs: providers, IdlePause: idle, Root: *root, Images: images, MinFreeDisk: cmp.Or(minFree, -1), MaxImageSize: cmp.Or(maxImage, -1), SSHAuthorizedKeys: *sshKeys, WarmPool: *warmPool}, *addr)
	if err != nil {
		return err
	}
	defer srv.Close()
	defer l.Close()
	if *prune {
		gone, err := srv.PruneImages()
		var freed int64
		for _, img := range gone {
			freed += img.Size
			fmt.Fprintf(stdout, "removed image %s (%s)\n", img.ID[:12], strings.Join(img.Refs, " "))
		}
		fmt.Fprintf(stdout, "pruned %d images, %d MB\n", len(gone), freed/1e6)
		if err != nil {
			return fmt.Errorf("-prune-images: %w", err)
		}
	}
	var sshL net.Listener
	if *sshAddr == "" && *sshKeys != "" {
		log.Warn("-ssh-authorized-keys is of no use without -ssh-addr: boxd serves no SSH")
	}
	if *sshAddr != "" {
		if sshL, err = net.Listen("tcp", *sshAddr); err != nil {
			return fmt.Errorf("-ssh-addr: %w", err)
		}
	}
	url := "http://" + l.Addr().String()
	fmt.Fprintf(stdout, "boxd listening on %s (data %s, isolation %s)\n", url, *data, *isolation)
	fmt.Fprintln(stdout, srv.DescribeRoot())
	if sshL != nil {
		// The host key is made (and kept in the data directory) before
		// SSH is announced, so whoever reads the announcement finds it.
		// Its fingerprint is what a client's first connection asks its
		// user to check.
		_, fp, err := srv.SSHHostKey()
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "boxd: SSH host key fingerprint %s (ED25519)\n", fp)
		host, port, _ := net.SplitHostPort(sshL.Addr().String())
		fmt.Fprintf(stdout, "ssh on %s port %s: ssh -p %s <box-id>@%s\n", host, port, port, host)
		go func() {
			if err := srv.ServeSSH(ctx, sshL); err != nil {
				log.Error("SSH server stopped", "err", err)
			}
		}()
	}
	if keptIn != "" {
		fmt.Fprintf(stdout, "API key: %s (kept in %s)\n", key, keptIn)
	}
	fmt.Fprintf(stdout, "export UPSTASH_BOX_BASE_URL=%s\n", url)
	return srv.Serve(ctx, l)
}

// pairInto parses a repeatable flag of key=value pairs into m; a key given
// twice is an error.
func pairInto(m map[string]string, key, value string) func(string) error {
	return func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" || val == "" {
			return fmt.Errorf("want %s=%s", key, value)
		}
		if _, dup := m[k]; dup {
			return fmt.Errorf("%s %s given twice", key, k)
		}
		m[k] = val
		return nil
	}
}

// parseSize reads a size in bytes, with an optional K, M, G or T (powers
// of 1024, and a B or iB after it if one likes).
func parseSize(v string) (int64, error) {
	s := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(v)), "IB"), "B")
	mult := int64(1)
	if s != "" {
		if i := strings.IndexByte("KMGT", s[len(s)-1]); i >= 0 {
			mult = 1 << (10 * (i + 1))
			s = s[:len(s)-1]
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size (512M, 2G, 0)", v)
	}
	return n * mult, nil
}

// usageError is a command line that could not be parsed.
type usageError struct{ error }

// keptKeyFile is the file in the data directory that holds the key boxd
// made itself when it was given none.
const keptKeyFile = "api-key"

// keptKey returns the key boxd keeps in its data directory, and the file's
// path: the one a boxd made there before, or a new random one, written
// there (readable by boxd's user alone) for the next start.
func keptKey(dataDir string) (key, path string, err error) {
	path = filepath.Join(dataDir, keptKeyFile)
	if b, err := os.ReadFile(path); err == nil {
		key = strings.TrimSpace(string(b))
		if key == "" || strings.ContainsAny(key, "\r\n") {
			return "", "", fmt.Errorf("%s must hold the API key alone, on one line (delete it for a new key)", path)
		}
		return key, path, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("the API key kept in the data directory: %w", err)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	key = "box_local_" + hex.EncodeToString(b[:])
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", "", fmt.Errorf("-data: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return keptKey(dataDir) // another boxd made it a moment ago
	}
	if err != nil {
		return "", "", fmt.Errorf("keeping the API key in the data directory: %w", err)
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return "", "", fmt.Errorf("keeping the API key in the data directory: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return "", "", fmt.Errorf("keeping the API key in the data directory: %w", err)
	}
	return key, path, nil
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
