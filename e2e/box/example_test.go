//go:build linux

// Examples run against an embedded boxd, which runs boxes only on Linux;
// an Example cannot skip, so elsewhere this file is left out.

package box_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/local"
)

// exampleClient starts a local boxd for an example and returns a client
// for it. Real programs call box.NewClient() and reach the cloud.
func exampleClient() (*box.Client, func()) {
	dir, err := os.MkdirTemp("", "box-example-")
	if err != nil {
		log.Fatal(err)
	}
	isolation := local.IsolationBwrap
	if local.CheckIsolation() != nil {
		isolation = local.IsolationNone
	}
	srv, err := local.New(local.Config{DataDir: dir, APIKey: "example-key", Isolation: isolation})
	if err != nil {
		log.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	c, err := box.NewClient(box.WithAPIKey("example-key"), box.WithBaseURL(ts.URL))
	if err != nil {
		log.Fatal(err)
	}
	return c, func() { ts.Close(); srv.Close(); os.RemoveAll(dir) }
}

func ExampleExec_Command() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()

	b, err := client.Create(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Delete(ctx)

	run, err := b.Exec.Command(ctx, "echo hello; exit 3")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(run.Stdout)
	fmt.Println(run.Status, run.ExitCode)
	// Output:
	// hello
	// failed 3
}

func ExampleExec_Code() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()

	b, err := client.Create(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Delete(ctx)

	run, err := b.Exec.Code(ctx, &box.CodeParams{Lang: box.LangTS, Code: "const n: number = 6; console.log(n * 7)"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(run.Result)
	// Output: 42
}

func ExampleBox_Cd() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()

	b, err := client.Create(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Delete(ctx)

	if err := b.Cd(ctx, "missing"); errors.Is(err, os.ErrNotExist) {
		fmt.Println("no such directory; still in", b.Cwd())
	}
	if err := b.Files.Mkdir(ctx, "project/src", &box.MkdirParams{Parents: true}); err != nil {
		log.Fatal(err)
	}
	if err := b.Cd(ctx, "project/src"); err != nil {
		log.Fatal(err)
	}
	run, _ := b.Exec.Command(ctx, "pwd")
	fmt.Print(run.Stdout)
	// Output:
	// no such directory; still in /workspace/home
	// /workspace/home/project/src
}

func ExampleFiles_Read() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()

	b, err := client.Create(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Delete(ctx)

	if err := b.Files.Write(ctx, "data.bin", []byte{0, 1, 2, 255}); err != nil {
		log.Fatal(err)
	}
	data, _ := b.Files.Read(ctx, "data.bin")
	part, _ := b.Files.ReadRange(ctx, "data.bin", 1, 2)
	fmt.Println(data, part)

	_, err = b.Files.Read(ctx, "nope.txt")
	var apiErr *box.Error
	if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound {
		fmt.Println("not found:", apiErr.Message)
	}
	// Output:
	// [0 1 2 255] [1 2]
	// not found: no such file or directory: /workspace/home/nope.txt
}
