//go:build linux

// Examples run against an embedded boxd, which runs boxes only on Linux;
// an Example cannot skip, so elsewhere this file is left out.

package box_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/local"
)

func ExampleSchedule_Exec() {
	// A local boxd on a fake clock, so that the example need not wait for
	// a real minute. Real programs call box.NewClient() and reach the
	// cloud.
	clock := boxtest.NewFakeClock(time.Date(2030, 1, 1, 8, 59, 0, 0, time.UTC))
	dir, err := os.MkdirTemp("", "box-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	isolation := local.IsolationBwrap
	if local.CheckIsolation() != nil {
		isolation = local.IsolationNone
	}
	srv, err := local.New(local.Config{DataDir: dir, APIKey: "example-key", Isolation: isolation, Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	client, err := box.NewClient(box.WithAPIKey("example-key"), box.WithBaseURL(ts.URL))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	b, err := client.Create(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Delete(ctx)

	s, err := b.Schedule.Exec(ctx, &box.ExecScheduleParams{
		Cron:    "0 9 * * *", // 09:00 UTC every day
		Command: []string{"sh", "-c", "echo good morning"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Status, s.Folder)

	clock.Advance(time.Minute) // 09:00
	for {
		s, err = b.Schedule.Get(ctx, s.ID)
		if err != nil {
			log.Fatal(err)
		}
		if s.TotalRuns > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	runs, err := b.Runs(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range runs {
		if r.ID == s.LastRunID {
			fmt.Printf("%t %s at %s: %s", r.ScheduleID == s.ID, r.Status, s.LastRunAt.UTC().Format(time.TimeOnly), r.Output)
		}
	}

	// Only what is set changes.
	s, err = b.Schedule.Update(ctx, s.ID, &box.ScheduleUpdate{Cron: box.Set("30 9 * * 1-5")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Cron, s.Command)
	// Output:
	// active /workspace/home
	// true completed at 09:00:00: good morning
	// 30 9 * * 1-5 [sh -c echo good morning]
}
