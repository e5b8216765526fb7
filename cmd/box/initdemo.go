package main

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// The files of init-demo.
const demoMain = `// Command box-demo creates an Upstash Box, runs a command and a Python
// snippet in it, writes and reads a file, and deletes it.
//
// It reads UPSTASH_BOX_API_KEY (and UPSTASH_BOX_BASE_URL, for boxd) from
// the environment, or from .env beside it.
package main

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/upstash/box-go/box"
)

func main() {
	loadEnv(".env")
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	client, err := box.NewClient()
	if err != nil {
		return err
	}
	b, err := client.Create(ctx, &box.CreateParams{Runtime: box.RuntimePython})
	if err != nil {
		return err
	}
	defer b.Delete(context.WithoutCancel(ctx))
	fmt.Println("created box", b.ID())

	out, err := b.Exec.Command(ctx, "echo hello from $(hostname)")
	if err != nil {
		return err
	}
	fmt.Print(out.Stdout)

	code, err := b.Exec.Code(ctx, &box.CodeParams{Lang: box.LangPython, Code: "print(sum(range(101)))"})
	if err != nil {
		return err
	}
	fmt.Print("python says ", code.Stdout)

	if err := b.Files.WriteText(ctx, "notes.txt", "written from Go\n"); err != nil {
		return err
	}
	text, err := b.Files.ReadText(ctx, "notes.txt")
	if err != nil {
		return err
	}
	fmt.Print("read back: ", text)
	return nil
}

// loadEnv sets the variables of a KEY=VALUE file that the environment
// does not set already.
func loadEnv(name string) {
	f, err := os.Open(name)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if _, set := os.LookupEnv(k); ok && !set && v != "" {
			os.Setenv(k, strings.Trim(v, "\"'"))
		}
	}
}
`

// demoEnv is the demo's .env: the key and base URL box was given, when
// it was given them.
func demoEnv(key, baseURL string) string {
	env := "# Your Upstash Box API key (from the Upstash console):\nUPSTASH_BOX_API_KEY=" + key + "\n"
	if baseURL != "" {
		return env + "# The server: a boxd (box serve), or the cloud when this line is removed.\nUPSTASH_BOX_BASE_URL=" + baseURL + "\n"
	}
	return env + "# Uncomment to use a local boxd (box serve) instead of the cloud:\n# UPSTASH_BOX_BASE_URL=http://127.0.0.1:8989\n"
}

const demoReadme = `# box-demo

A Go program that uses the Upstash Box SDK: it creates a box, runs a
command and a Python snippet, writes and reads a file, and deletes the box.

    go mod tidy
    go run .

Put your API key in .env, or export UPSTASH_BOX_API_KEY. To try it on this
machine without an account, start the local backend (box serve) and set
UPSTASH_BOX_BASE_URL and UPSTASH_BOX_API_KEY as it prints them.
`

func (a *app) initDemoCmd() *cobra.Command {
	var runIt, noRun bool
	c := &cobra.Command{
		Use:   "init-demo [dir]",
		Short: "Make a small Go program that uses the SDK (default ./box-demo), and offer to run it",
		Args:  rangeArgs(0, 1, "at most one directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.json && runIt {
				return usageError{errors.New("--json only writes the files; run the program without it")}
			}
			dir := "box-demo"
			if len(args) == 1 {
				dir = args[0]
			}
			if _, err := os.Stat(dir); err == nil {
				if entries, _ := os.ReadDir(dir); len(entries) > 0 {
					return fmt.Errorf("%s exists and is not empty", dir)
				}
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			// The key box was given (--token or UPSTASH_BOX_API_KEY), and
			// the server, go into .env (readable by its owner alone), so
			// that the program runs as box does; without one, .env is
			// for the user to fill in.
			key, baseURL := cmp.Or(a.token, os.Getenv("UPSTASH_BOX_API_KEY")), cmp.Or(a.baseURL, os.Getenv("UPSTASH_BOX_BASE_URL"))
			if strings.ContainsAny(key+baseURL, "\r\n") {
				return usageError{errors.New("the API key and the base URL must be one line each")}
			}
			gomod := "module box-demo\n\ngo 1.25\n" // the SDK's own go directive
			if v := sdkVersion(); v != "" {
				gomod += "\nrequire github.com/upstash/box-go " + v + "\n"
			}
			files := map[string]string{
				"main.go":   demoMain,
				".env":      demoEnv(key, baseURL),
				"README.md": demoReadme,
				"go.mod":    gomod,
			}
			for name, content := range files {
				mode := os.FileMode(0o644)
				if name == ".env" {
					mode = 0o600
				}
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
					return err
				}
			}
			if a.json {
				// For scripts: what was written, and nothing is run.
				return a.printJSON(map[string]any{"dir": dir, "files": []string{"main.go", "go.mod", ".env", "README.md"}})
			}
			fmt.Fprintf(a.stdout, "wrote %s: main.go, go.mod, .env, README.md\n", dir)
			if noRun {
				return nil
			}
			if !runIt && a.interactive() {
				fmt.Fprint(a.stdout, "Run it now (go mod tidy, go run .)? [y/N] ")
				answer, _ := bufio.NewReader(a.stdin).ReadString('\n')
				runIt = strings.HasPrefix(strings.ToLower(strings.TrimSpace(answer)), "y")
			}
			if !runIt {
				fmt.Fprintf(a.stdout, "Run it with: cd %s && go mod tidy && go run .\n", dir)
				return nil
			}
			for _, argv := range [][]string{{"go", "mod", "tidy"}, {"go", "run", "."}} {
				c := exec.CommandContext(cmd.Context(), argv[0], argv[1:]...)
				c.Dir, c.Stdout, c.Stderr = dir, a.stdout, a.stderr
				c.Env = os.Environ()
				if a.token != "" {
					c.Env = append(c.Env, "UPSTASH_BOX_API_KEY="+a.token)
				}
				if a.baseURL != "" {
					c.Env = append(c.Env, "UPSTASH_BOX_BASE_URL="+a.baseURL)
				}
				if err := c.Run(); err != nil {
					return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
				}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&runIt, "run", false, "run the program without asking")
	c.Flags().BoolVar(&noRun, "no-run", false, "only write the files (as --json does)")
	c.MarkFlagsMutuallyExclusive("run", "no-run")
	return c
}

// placeholderVersion is the version at which this repository's modules
// require one another; go.work points each at its directory.
const placeholderVersion = "v0.0.0-00010101000000-000000000000"

// sdkVersion is the version of the SDK this command was built with, for
// the demo's go.mod, or "" for a development build (go mod tidy then
// takes the latest).
func sdkVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" && bi.Main.Path == "github.com/upstash/box-go" {
			return v
		}
		for _, d := range bi.Deps {
			// A build in this repository's workspace has the SDK replaced
			// by its directory, at the placeholder version no proxy serves.
			if d.Path == "github.com/upstash/box-go" && d.Replace == nil && d.Version != "" && d.Version != "(devel)" && d.Version != placeholderVersion {
				return d.Version
			}
		}
	}
	return ""
}
