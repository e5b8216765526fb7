// Command shell opens an interactive shell in a box, over a live exec
// session (a WebSocket): your terminal becomes the box's terminal.
//
//	go run ./examples/shell                # a new box, deleted on exit
//	go run ./examples/shell -box <id>      # an existing box, kept
//	echo 'uname -a; pwd' | go run ./examples/shell
//
// When standard input is a terminal, it is put in raw mode and the box's
// shell gets a PTY of the same size, kept in step when the window is
// resized: keys go to the box as typed, so Ctrl-C interrupts the program
// running in the box (not this one) and Ctrl-D at the prompt ends the
// shell. Otherwise (a pipe or a file) the shell reads its commands from
// standard input without a terminal, and an interrupt (Ctrl-C, SIGINT) is
// passed on to the box as SIGINT. SIGTERM or SIGHUP hang up.
//
// The exit status is the shell's. It uses the server at
// UPSTASH_BOX_BASE_URL (a boxd, say) when that is set, the Upstash Box
// cloud when only UPSTASH_BOX_API_KEY is, and an embedded local backend
// (boxd, on Linux) otherwise. Status lines go to standard error, so that standard output
// carries only what the box writes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"

	"golang.org/x/term"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/examples/internal/backend"
	"github.com/upstash/box-go/internal/terminal"
)

func main() {
	boxID := flag.String("box", "", "id or name of an existing box (default: create one and delete it on exit)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("shell: ")
	code, err := run(*boxID)
	if err != nil {
		log.Print(err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func run(boxID string) (int, error) {
	ctx := context.Background()

	// backend.Connect reports on standard output; keep that free for
	// the box.
	stdout := os.Stdout
	os.Stdout = os.Stderr
	be, err := backend.Connect(ctx)
	os.Stdout = stdout
	if err != nil {
		return 1, err
	}
	defer be.Close()
	client := be.Client

	var b *box.Box
	if boxID != "" {
		if b, err = client.Get(ctx, boxID, nil); err != nil {
			return 1, err
		}
	} else {
		if b, err = client.Create(ctx, nil); err != nil {
			return 1, fmt.Errorf("create: %w", err)
		}
		defer func() {
			if err := b.Delete(context.WithoutCancel(ctx)); err != nil {
				log.Printf("delete %s: %v", b.ID(), err)
			}
		}()
		fmt.Fprintf(os.Stderr, "created box %s\n", b.ID())
	}

	code, err := terminal.Run(ctx, b, terminal.Params{
		Argv:   []string{"bash", "-l"},
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		TTY:    term.IsTerminal(int(os.Stdin.Fd())),
	})
	if errors.Is(err, terminal.ErrHungUp) {
		return code, errors.New("hung up")
	}
	return code, err
}
