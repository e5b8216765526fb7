package main

import (
	"github.com/spf13/cobra"

	"github.com/upstash/box-go/cmd/internal/boxdcli"
)

func (a *app) serveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "serve [boxd flags]",
		Short: "Run boxd, the local backend, with the flags of cmd/boxd (box serve -h lists them)",
		// boxd parses its own flags, as cmd/boxd does.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := boxdcli.Main("box serve", args, a.stdout, a.stderr); code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
}
