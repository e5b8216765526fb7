package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/upstash/box-go/box"
)

// desktopView is what box desktop prints in JSON.
type desktopView struct {
	URL       string `json:"url"`
	WebSocket string `json:"raw_ws_url,omitempty"`
	Auth      string `json:"auth,omitempty"`
	Username  string `json:"username,omitempty"`
	Password  string `json:"password,omitempty"`
	Token     string `json:"token,omitempty"`
	Width     int    `json:"width"`
	Height    int    `json:"height"`
}

func (a *app) desktopCmd() *cobra.Command {
	var (
		width, height int
		open, auth    string
		viewOnly      bool
	)
	c := &cobra.Command{
		Use:   "desktop <box-id>",
		Short: "Start a box's desktop and print its viewer's URL; screenshot, stop",
		Long: "box desktop starts the desktop of a box created with --desktop (or Desktop: true) and\n" +
			"prints the URL of its live viewer, which a browser opens, with the user name and\n" +
			"password (or token) the viewer asks for.",
		Args: exactArgs(1, "a box id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			switch box.StreamAuth(auth) {
			case box.StreamAuthBasic, box.StreamAuthToken, box.StreamAuthNone:
			default:
				return usageError{fmt.Errorf("--auth %q is not basic, token or none", auth)}
			}
			if (width != 0 && (width < 640 || width > 3840)) || (height != 0 && (height < 480 || height > 2160)) {
				return usageError{fmt.Errorf("--width must be 640 to 3840 and --height 480 to 2160")}
			}
			b, err := a.getBox(ctx, args[0])
			if err != nil {
				return err
			}
			var info *box.DesktopInfo
			if err := a.spin("starting the desktop", func() (err error) {
				info, err = b.Desktop.Start(ctx, &box.DesktopStartParams{Width: width, Height: height, Open: open})
				return err
			}); err != nil {
				return err
			}
			v, err := b.Desktop.Stream(ctx, &box.StreamParams{Auth: box.StreamAuth(auth), ViewOnly: viewOnly})
			if err != nil {
				return err
			}
			a.secrets = append(a.secrets, v.Password, v.Token)
			if a.json {
				return a.printJSON(desktopView{URL: v.URL, WebSocket: v.RawWebSocketURL, Auth: string(v.Auth), Username: v.Username, Password: v.Password, Token: v.Token, Width: info.Width, Height: info.Height})
			}
			fmt.Fprintf(a.stdout, "desktop of %s at %dx%d\nviewer: %s\n", safe(b.ID()), info.Width, info.Height, v.URL)
			if v.Username != "" {
				fmt.Fprintf(a.stdout, "user: %s\npassword: %s\n", v.Username, v.Password)
			}
			return nil
		},
	}
	c.Flags().IntVar(&width, "width", 0, "screen width, 640 to 3840 (default 1280)")
	c.Flags().IntVar(&height, "height", 0, "screen height, 480 to 2160 (default 800)")
	c.Flags().StringVar(&open, "open", "", "a URL to open in the desktop's Chromium")
	c.Flags().StringVar(&auth, "auth", "basic", "how the viewer is protected: basic, token or none")
	c.Flags().BoolVar(&viewOnly, "view-only", false, "the viewer sees the screen and sends no input")

	var noCursor bool
	shot := &cobra.Command{
		Use:   "screenshot <box-id> <file.png|->",
		Short: "Write a PNG of a box's desktop to a file, or to standard output with -",
		Args:  exactArgs(2, "a box id and a file (- for standard output)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			b, err := a.getBox(ctx, args[0])
			if err != nil {
				return err
			}
			png, err := b.Desktop.ScreenshotPNG(ctx, &box.DesktopScreenshotParams{NoCursor: noCursor})
			if err != nil {
				return err
			}
			if args[1] == "-" {
				_, err = a.stdout.Write(png)
				return err
			}
			if err := os.WriteFile(args[1], png, 0o644); err != nil {
				return err
			}
			if !a.json {
				fmt.Fprintf(a.stderr, "wrote %s (%d bytes)\n", args[1], len(png))
			}
			return nil
		},
	}
	shot.Flags().BoolVar(&noCursor, "no-cursor", false, "leave the mouse pointer out")
	c.AddCommand(shot, a.boxAction("stop", "Stop a box's desktop and revoke its viewer", "stopped desktop", func(ctx context.Context, b *box.Box) error {
		return b.Desktop.Stop(ctx)
	}))
	return c
}
