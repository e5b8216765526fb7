//go:build linux

// Examples run against an embedded boxd, which runs boxes only on Linux;
// an Example cannot skip, so elsewhere this file is left out.

package box_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"strings"
	"time"

	"github.com/upstash/box-go/box"
)

// Files of any size stream: WriteFrom takes any io.Reader, Open returns
// an io.ReadCloser, in constant memory.
func ExampleFiles_WriteFrom() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()
	b, err := client.Create(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Delete(ctx)

	src := strings.NewReader(strings.Repeat("a line of a large log\n", 100000))
	n, err := b.Files.WriteFrom(ctx, "logs/app.log", src, &box.TransferParams{
		Progress: func(done, total int64) {}, // e.g. draw a progress bar
	})
	if err != nil {
		log.Fatal(err)
	}
	r, err := b.Files.Open(ctx, "logs/app.log", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	back, _ := io.Copy(io.Discard, r)
	fmt.Println(n, back)
	// Output: 2200000 2200000
}

// A box's files as an io/fs file system: fs.WalkDir, http.FileServerFS
// and template.ParseFS work on it.
func ExampleFiles_FS() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()
	b, err := client.Create(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Delete(ctx)
	if _, err := b.Exec.Command(ctx, "mkdir -p site/css && echo hi > site/index.html && echo 'p{}' > site/css/a.css"); err != nil {
		log.Fatal(err)
	}

	err = fs.WalkDir(b.Files.FS(ctx, "site"), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fmt.Println(p)
		}
		return err
	})
	fmt.Println(err)
	// Output:
	// css/a.css
	// index.html
	// <nil>
}

// Options given to a call apply to its requests only.
func ExampleWithRequestTimeout() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()
	b, err := client.Create(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Delete(ctx)

	_, err = b.Exec.Command(ctx, "sleep 5", box.WithRequestTimeout(200*time.Millisecond), box.WithMaxRetries(0))
	fmt.Println(err != nil)
	run, err := b.Exec.Command(ctx, "echo with the client timeout", box.WithHeader("X-Trace", "abc"))
	fmt.Print(run.Stdout, err, "\n")
	// Output:
	// true
	// with the client timeout
	// <nil>
}

// Errors a caller may branch on are matched with errors.Is: io/fs's for
// files, ErrInvalid for arguments the SDK refuses before sending.
func ExampleErrInvalid() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()
	b, err := client.Create(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Delete(ctx)

	_, err = b.Files.Read(ctx, "no/such/file")
	var apiErr *box.Error
	fmt.Println(errors.Is(err, fs.ErrNotExist), errors.As(err, &apiErr) && apiErr.StatusCode == 404)
	err = b.Files.Mkdir(ctx, "/workspace/home", nil)
	fmt.Println(errors.Is(err, fs.ErrExist))
	_, err = b.Exec.Command(ctx, "")
	fmt.Println(errors.Is(err, box.ErrInvalid), err)
	// Output:
	// true true
	// true
	// true box: command is required
}
