// Command quickstart creates a box, writes a file, runs a command and a
// Python snippet, reads the file back, lists the workspace and deletes the
// box.
//
// It uses the server at UPSTASH_BOX_BASE_URL (a boxd, say) when that is
// set, the Upstash Box cloud when only UPSTASH_BOX_API_KEY is, and an
// embedded local backend (boxd) otherwise, so it runs offline on Linux:
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
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
	client := be.Client

	start := time.Now()
	b, err := client.Create(ctx, &box.CreateParams{Name: fmt.Sprintf("quickstart-%d", time.Now().Unix()), Runtime: box.RuntimePython})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	defer func() {
		if err := b.Delete(context.WithoutCancel(ctx)); err != nil {
			log.Printf("delete: %v", err)
		} else {
			fmt.Println("deleted box", b.ID())
		}
	}()
	fmt.Printf("created box %s in %v\n", b.ID(), time.Since(start).Round(time.Millisecond))

	if err := b.Files.WriteText(ctx, "hello.txt", "Hello from Go!\n"); err != nil {
		return fmt.Errorf("write: %w", err)
	}

	run, err := b.Exec.Command(ctx, "wc -c hello.txt && uname -s && whoami")
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	fmt.Printf("command (exit %d):\n%s", run.ExitCode, run.Stdout)

	code, err := b.Exec.Code(ctx, &box.CodeParams{
		Lang: box.LangPython,
		Code: "import pathlib\ntext = pathlib.Path('hello.txt').read_text()\nprint(text.upper(), end='')\nprint(sum(range(101)))",
	})
	if err != nil {
		return fmt.Errorf("code: %w", err)
	}
	fmt.Printf("python (exit %d):\n%s", code.ExitCode, code.Stdout)

	text, err := b.Files.ReadText(ctx, "hello.txt")
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	fmt.Printf("read back: %q\n", text)

	entries, err := b.Files.List(ctx, "")
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	fmt.Println("workspace:")
	for _, e := range entries {
		fmt.Printf("  %-12s %6d bytes\n", e.Name, e.Size)
	}
	return nil
}
