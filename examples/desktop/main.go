// Command desktop creates a box with a desktop, opens a page in its
// Chromium, clicks and types on the screen, saves a screenshot as
// desktop.png, prints a URL to watch the desktop live, and deletes the
// box.
//
// It uses the server at UPSTASH_BOX_BASE_URL (a boxd, say) when that is
// set, the Upstash Box cloud when only UPSTASH_BOX_API_KEY is, and an
// embedded local backend (boxd) otherwise; there, desktops need
// bubblewrap and Debian's xvfb, openbox, x11vnc, xdotool, imagemagick,
// chromium and novnc:
//
//	go run ./examples/desktop
package main

import (
	"context"
	"fmt"
	"image"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/examples/internal/backend"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	be, err := backend.Connect(ctx)
	if err != nil {
		return err
	}
	defer be.Close()

	b, err := be.Client.Create(ctx, &box.CreateParams{Desktop: true})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	defer func() {
		if err := b.Delete(context.WithoutCancel(ctx)); err != nil {
			log.Printf("delete: %v", err)
		}
	}()
	// A page of the box's own: a field to type into.
	page := `<input autofocus style="position:fixed;top:30vh;left:10vw;width:80vw;height:20vh;font-size:48px" placeholder="type here">`
	if err := b.Files.WriteText(ctx, "page.html", page); err != nil {
		return err
	}

	start := time.Now()
	d, err := b.Desktop.Start(ctx, &box.DesktopStartParams{Width: 1280, Height: 800, Open: "file:///workspace/home/page.html"})
	if err != nil {
		return fmt.Errorf("start the desktop: %w", err)
	}
	fmt.Printf("desktop of %s at %dx%d in %v\n", b.ID(), d.Width, d.Height, time.Since(start).Round(time.Millisecond))
	// Chromium comes up and loads the page: wait until the screen is no
	// longer all black at the field.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		img, err := b.Desktop.Screenshot(ctx, &box.DesktopScreenshotParams{NoCursor: true})
		if err != nil {
			return err
		}
		if r, g, bl, _ := img.At(640, 380).RGBA(); r+g+bl > 0 {
			break
		}
		if time.Now().After(deadline) {
			log, _ := b.Files.ReadText(ctx, "/tmp/.boxd-chromium.log")
			return fmt.Errorf("the page did not show within 30 s; Chromium said:\n%s", log)
		}
	}
	fmt.Printf("page shown %v after the start\n", time.Since(start).Round(time.Millisecond))

	if err := b.Desktop.LeftClick(ctx, image.Pt(640, 380)); err != nil {
		return err
	}
	if err := b.Desktop.Type(ctx, "Hello from Go!", 20*time.Millisecond); err != nil {
		return err
	}
	png, err := b.Desktop.ScreenshotPNG(ctx, nil)
	if err != nil {
		return err
	}
	if err := os.WriteFile("desktop.png", png, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote desktop.png (%d bytes)\n", len(png))

	view, err := b.Desktop.Stream(ctx, &box.StreamParams{ViewOnly: true})
	if err != nil {
		return fmt.Errorf("viewer: %w", err)
	}
	fmt.Printf("watch it at %s (user %s)\n", view.URL, view.Username)
	return nil
}
