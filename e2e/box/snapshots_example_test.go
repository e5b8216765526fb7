//go:build linux

// Examples run against an embedded boxd, which runs boxes only on Linux;
// an Example cannot skip, so elsewhere this file is left out.

package box_test

import (
	"context"
	"fmt"
	"log"
)

func ExampleBox_Snapshot() {
	client, done := exampleClient()
	defer done()
	ctx := context.Background()

	b, err := client.Create(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Delete(ctx)
	if err := b.Files.WriteText(ctx, "state.txt", "set up"); err != nil {
		log.Fatal(err)
	}

	snap, err := b.Snapshot(ctx, "after-setup")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(snap.Name, snap.Status)

	// A new box with the snapshot's files; b is not changed.
	restored, err := client.FromSnapshot(ctx, snap.ID, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer restored.Delete(ctx)
	text, _ := restored.Files.ReadText(ctx, "state.txt")
	fmt.Println(text)

	n, err := client.DeleteSnapshots(ctx, []string{snap.ID})
	fmt.Println(n, err)
	// Output:
	// after-setup ready
	// set up
	// 1 <nil>
}
