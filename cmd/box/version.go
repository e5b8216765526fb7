package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/upstash/box-go/box"
)

// versionProbeTimeout bounds box version's request to the server.
const versionProbeTimeout = 5 * time.Second

// cliVersion is the version of the box command's module, "(devel)" when
// built from a checkout.
func cliVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the versions of box and its SDK, and whether the server answers",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			type server struct {
				URL       string `json:"url,omitempty"`
				Reachable bool   `json:"reachable"`
				Error     string `json:"error,omitempty"`
				Millis    int64  `json:"millis,omitempty"`
			}
			out := struct {
				CLI      string  `json:"cli"`
				SDK      string  `json:"sdk"`
				Go       string  `json:"go"`
				Platform string  `json:"platform"`
				Server   *server `json:"server"`
			}{CLI: cliVersion(), SDK: box.Version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			// The server is asked only when there is a key to ask it with.
			var failed error
			if cl, err := a.api(); err == nil {
				out.Server = &server{URL: cl.BaseURL()}
				ctx, cancel := context.WithTimeout(cmd.Context(), versionProbeTimeout)
				start := time.Now()
				_, failed = cl.List(ctx, &box.ListParams{Label: "box-version-probe"})
				cancel()
				if failed == nil {
					out.Server.Reachable, out.Server.Millis = true, time.Since(start).Milliseconds()
				} else {
					out.Server.Error = a.redact(message(failed))
				}
			}
			if a.json {
				if err := a.printJSON(out); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.stdout, "box %s (SDK box-go %s, %s, %s)\n", out.CLI, out.SDK, out.Go, out.Platform)
				switch {
				case out.Server == nil:
					fmt.Fprintln(a.stdout, "server: not asked (no API key: pass --token or set UPSTASH_BOX_API_KEY)")
				case out.Server.Reachable:
					fmt.Fprintf(a.stdout, "server: %s answered in %d ms\n", safe(out.Server.URL), out.Server.Millis)
				default:
					fmt.Fprintf(a.stdout, "server: %s did not answer: %s\n", safe(out.Server.URL), safeLines(out.Server.Error))
				}
			}
			if failed != nil {
				// As docker version does when its daemon does not answer.
				return exitError{1}
			}
			return nil
		},
	}
}
