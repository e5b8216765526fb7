package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/upstash/box-go/box"
)

// box ssh runs the system's ssh into a box of boxd, with the user, host,
// port and host key that boxd tells (GET /v2/ssh), so that ssh asks
// nothing: the host key goes to a known-hosts file of box's own, and
// when no key of the user's logs in, box answers ssh's password prompt
// with the API key (box is ssh's SSH_ASKPASS for that).

// Environment of box when ssh runs it as its askpass program.
const (
	// envAskpassPrompt is the one prompt box answers with the key: the
	// password prompt of the box's host. Any other (a key's passphrase)
	// is asked on the terminal.
	envAskpassPrompt = "BOX_SSH_ASKPASS_PROMPT"
	envAskpassKey    = "BOX_SSH_ASKPASS_KEY"
)

// askpass answers a prompt of ssh, when box runs as its SSH_ASKPASS
// program; it reports false when box does not.
func askpass(args []string, stdout io.Writer) (code int, ok bool) {
	want := os.Getenv(envAskpassPrompt)
	if want == "" || len(args) != 1 {
		return 0, false
	}
	if args[0] == want {
		fmt.Fprintln(stdout, os.Getenv(envAskpassKey))
		return 0, true
	}
	// Not boxd's password: the user answers, on the terminal.
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return 1, true
	}
	defer tty.Close()
	fmt.Fprint(tty, args[0])
	line, err := term.ReadPassword(int(tty.Fd()))
	fmt.Fprintln(tty)
	if err != nil {
		return 1, true
	}
	fmt.Fprintln(stdout, string(line))
	return 0, true
}

func (a *app) sshCmd() *cobra.Command {
	var forwards []string
	var tty bool
	cmd := &cobra.Command{
		Use:   "ssh <box-id> [-- command [args...]]",
		Short: "Run ssh into a box of boxd: no host key to confirm, no password to type",
		Long: `Run the system's ssh (OpenSSH) into a box: boxd's SSH address and host
key come from the server (boxd started with -ssh-addr), and the host key
is written to a known-hosts file in box's configuration directory, so
ssh asks to trust nothing. ssh logs in with your keys when the account
has one of them (box ssh-key add), and with the API key otherwise.
After --, the command given runs instead of a shell. box exits with
ssh's status: the command's, or 255 when ssh fails.`,
		Args: func(cmd *cobra.Command, args []string) error {
			ids := len(args)
			if d := cmd.ArgsLenAtDash(); d >= 0 {
				ids = d
				if d == len(args) {
					return usageError{errors.New("expected a command after --")}
				}
			}
			if ids != 1 {
				return usageError{errors.New("expected a box id (and a command after --)")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			id, command := args[0], []string(nil)
			if d := cmd.ArgsLenAtDash(); d >= 0 {
				command = args[d:]
			}
			for _, f := range forwards {
				if strings.HasPrefix(f, "-") {
					return usageError{fmt.Errorf("-L %s: not a forward (want [bind:]port:host:hostport)", f)}
				}
			}
			sshPath, err := exec.LookPath("ssh")
			if err != nil {
				return errors.New("box ssh runs ssh (OpenSSH), which is not installed or not on PATH")
			}
			cl, err := a.api()
			if err != nil {
				return err
			}
			info, err := cl.SSHInfo(ctx)
			if box.IsNotFound(err) {
				return fmt.Errorf("%s serves no SSH that box ssh can find (GET /v2/ssh is boxd's: start boxd with -ssh-addr, or box serve -ssh-addr)", cl.BaseURL())
			}
			if err != nil {
				return err
			}
			host, port, err := sshHost(info, cl.BaseURL())
			if err != nil {
				return err
			}
			known, err := writeKnownHost(host, port, info.HostKey)
			if err != nil {
				return fmt.Errorf("writing boxd's host key for ssh: %w", err)
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			argv := []string{
				"-p", strconv.Itoa(port),
				"-o", "UserKnownHostsFile=" + known,
				"-o", "StrictHostKeyChecking=yes",
				"-o", "CheckHostIP=no",
				"-o", "PreferredAuthentications=publickey,password",
				"-o", "NumberOfPasswordPrompts=1",
			}
			if tty {
				argv = append(argv, "-t")
			}
			for _, f := range forwards {
				argv = append(argv, "-L", f)
			}
			argv = append(argv, "-l", id, "--", host)
			argv = append(argv, command...)
			c := exec.CommandContext(ctx, sshPath, argv...)
			c.Stdin, c.Stdout, c.Stderr = a.stdin, a.stdout, a.stderr
			c.Env = append(environWithout(os.Environ(), "UPSTASH_BOX_API_KEY", "SSH_ASKPASS", "SSH_ASKPASS_REQUIRE", envAskpassPrompt, envAskpassKey),
				"SSH_ASKPASS="+self, "SSH_ASKPASS_REQUIRE=force",
				envAskpassPrompt+"="+passwordPrompt(id, host), envAskpassKey+"="+a.apiKey())
			// Ctrl-C is ssh's to pass on (or to end it): box waits for it.
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, os.Interrupt)
			defer signal.Stop(sig)
			err = c.Run()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return exitError{ee.ExitCode()}
			}
			return err
		},
	}
	cmd.Flags().StringArrayVarP(&forwards, "local-forward", "L", nil, "forward a local port to a port in the box, as ssh -L does: [bind:]port:127.0.0.1:boxport (repeatable)")
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "give the command a terminal (ssh -t)")
	return cmd
}

// apiKey is the API key the client sends.
func (a *app) apiKey() string {
	if a.token != "" {
		return a.token
	}
	return os.Getenv("UPSTASH_BOX_API_KEY")
}

// passwordPrompt is the prompt of OpenSSH's ssh for user's password on
// host, which cuts the names as it does.
func passwordPrompt(user, host string) string {
	if len(user) > 30 {
		user = user[:30]
	}
	if len(host) > 128 {
		host = host[:128]
	}
	return user + "@" + host + "'s password: "
}

// sshHost is the host and port to reach boxd's SSH server at: where it
// listens, or, when it listens on every address, the host of baseURL.
func sshHost(info *box.SSHInfo, baseURL string) (string, int, error) {
	host, portText, err := net.SplitHostPort(info.Address)
	if err != nil {
		return "", 0, fmt.Errorf("the server's SSH address %q: %w", info.Address, err)
	}
	port := info.Port
	if port == 0 {
		if port, err = strconv.Atoi(portText); err != nil {
			return "", 0, fmt.Errorf("the server's SSH address %q has no port", info.Address)
		}
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		u, err := url.Parse(baseURL)
		if err != nil || u.Hostname() == "" {
			return "", 0, fmt.Errorf("the server listens for SSH on every address, and its URL %q names no host", baseURL)
		}
		host = u.Hostname()
	}
	return host, port, nil
}

// knownHostsFile is box's own known-hosts file, which holds the host
// keys of the boxd servers box ssh went to.
func knownHostsFile() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "box", "ssh_known_hosts"), nil
}

// writeKnownHost makes key the one host key of host:port in box's
// known-hosts file, and returns the file's path. The key comes from the
// server over the API, with the API key: it replaces an older key of
// the same host (a boxd started on a new data directory).
func writeKnownHost(host string, port int, key string) (string, error) {
	file, err := knownHostsFile()
	if err != nil {
		return "", err
	}
	if strings.ContainsAny(key, "\r\n") || len(strings.Fields(key)) < 2 {
		return "", fmt.Errorf("the server's host key %q is not a key", key)
	}
	pattern := host
	if port != 22 {
		pattern = "[" + host + "]:" + strconv.Itoa(port)
	}
	entry := pattern + " " + strings.Join(strings.Fields(key)[:2], " ")
	var lines []string
	if f, err := os.Open(file); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if line == entry {
				f.Close()
				return file, nil // there already
			}
			if fields := strings.Fields(line); len(fields) > 0 && fields[0] == pattern {
				continue
			}
			lines = append(lines, line)
		}
		f.Close()
	}
	lines = append(lines, entry)
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".ssh_known_hosts-*")
	if err != nil {
		return "", err
	}
	_, err = io.WriteString(tmp, strings.Join(lines, "\n")+"\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return file, nil
}

// environWithout is env without the variables named.
func environWithout(env []string, names ...string) []string {
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			if k == n {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}

// --- the account's SSH keys

func (a *app) sshKeyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ssh-key",
		Short: "Manage the public keys that log in to boxd's SSH server (box ssh, ssh <box-id>@host)",
	}
	cmd.AddCommand(a.sshKeyAddCmd(), a.sshKeyLsCmd(), a.sshKeyRmCmd())
	return cmd
}

// sshKeyView is an SSH key as the CLI prints it in JSON.
type sshKeyView struct {
	ID          string    `json:"id"`
	Type        string    `json:"type"`
	Fingerprint string    `json:"fingerprint"`
	Comment     string    `json:"comment,omitempty"`
	PublicKey   string    `json:"public_key"`
	CreatedAt   time.Time `json:"created_at"`
}

func viewOfSSHKey(k box.SSHKey) sshKeyView {
	return sshKeyView{ID: k.ID, Type: k.Type, Fingerprint: k.Fingerprint, Comment: k.Comment, PublicKey: k.PublicKey, CreatedAt: k.CreatedAt}
}

// defaultPublicKeys are the public keys ssh-keygen makes by default, in
// the order box ssh-key add looks for them.
var defaultPublicKeys = []string{"id_ed25519.pub", "id_ecdsa.pub", "id_rsa.pub"}

func (a *app) sshKeyAddCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "add [FILE|-]",
		Short: "Add public keys (an authorized_keys or .pub file, - for standard input; default ~/.ssh/id_ed25519.pub, id_ecdsa.pub or id_rsa.pub)",
		Args:  rangeArgs(0, 1, "at most one file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, raw, err := a.readPublicKeys(args)
			if err != nil {
				return err
			}
			var keys []string
			for _, line := range strings.Split(string(raw), "\n") {
				if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
					keys = append(keys, line)
				}
			}
			switch {
			case strings.Contains(string(raw), "PRIVATE KEY"):
				// Never sent: a private key stays where it is.
				return usageError{fmt.Errorf("%s is a private key: give its public key (the .pub file)", name)}
			case len(keys) == 0:
				return usageError{fmt.Errorf("%s holds no public key", name)}
			}
			cl, err := a.api()
			if err != nil {
				return err
			}
			added := []sshKeyView{}
			var failed error
			for i, k := range keys {
				got, err := cl.AddSSHKey(cmd.Context(), k)
				if err != nil {
					if cmd.Context().Err() != nil {
						return err
					}
					if len(keys) == 1 {
						return err
					}
					fmt.Fprintf(a.stderr, "box: %s, key %d: %s\n", safe(name), i+1, safeLines(a.redact(message(err))))
					if failed == nil || statusOf(err) == 2 {
						failed = err
					}
					continue
				}
				added = append(added, viewOfSSHKey(*got))
				if !a.json {
					fmt.Fprintf(a.stdout, "added %s %s %s\n", safe(got.ID), safe(got.Fingerprint), safe(cmp.Or(got.Comment, got.Type)))
				}
			}
			if a.json {
				if err := a.printJSON(added); err != nil {
					return err
				}
			}
			if failed != nil {
				return exitError{statusOf(failed)}
			}
			return nil
		},
	}
}

// readPublicKeys reads the file that args name, standard input for -, or
// the user's default public key; it returns what it read and its name.
func (a *app) readPublicKeys(args []string) (string, []byte, error) {
	const limit = 1 << 20
	read := func(name string, r io.Reader) (string, []byte, error) {
		raw, err := io.ReadAll(io.LimitReader(r, limit+1))
		if err != nil {
			return "", nil, err
		}
		if len(raw) > limit {
			return "", nil, usageError{fmt.Errorf("%s is larger than a file of public keys can be (1 MiB)", name)}
		}
		return name, raw, nil
	}
	if len(args) == 1 && args[0] == "-" {
		return read("standard input", a.stdin)
	}
	if len(args) == 1 {
		f, err := os.Open(args[0])
		if err != nil {
			return "", nil, usageError{err}
		}
		defer f.Close()
		return read(args[0], f)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", nil, usageError{errors.New("no file given, and no home directory to find ~/.ssh/id_ed25519.pub in")}
	}
	for _, n := range defaultPublicKeys {
		p := filepath.Join(home, ".ssh", n)
		if f, err := os.Open(p); err == nil {
			defer f.Close()
			return read(p, f)
		}
	}
	return "", nil, usageError{fmt.Errorf("no file given, and none of ~/.ssh/%s exists (make a key with ssh-keygen)", strings.Join(defaultPublicKeys, ", "))}
}

func (a *app) sshKeyLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the account's SSH keys",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.api()
			if err != nil {
				return err
			}
			keys, err := cl.ListSSHKeys(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				views := make([]sshKeyView, 0, len(keys))
				for _, k := range keys {
					views = append(views, viewOfSSHKey(k))
				}
				return a.printJSON(views)
			}
			rows := make([][]string, 0, len(keys))
			for _, k := range keys {
				rows = append(rows, []string{k.ID, k.Type, k.Fingerprint, k.Comment, ago(k.CreatedAt)})
			}
			return a.table([]string{"ID", "TYPE", "FINGERPRINT", "COMMENT", "ADDED"}, rows, nil)
		},
	}
}

func (a *app) sshKeyRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm <key-id>...",
		Aliases: []string{"delete"},
		Short:   "Remove SSH keys from the account",
		Args:    atLeast(1, "at least one key id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.api()
			if err != nil {
				return err
			}
			return a.eachID(cmd.Context(), args, "removed", func(ctx context.Context, id string) error {
				return cl.DeleteSSHKey(ctx, id)
			})
		},
	}
}
