package local

import (
	"reflect"
	"testing"

	"github.com/upstash/box-go/gen"
)

// servedByAgent lists the operations of the dataPlane routes, which boxd
// proxies to the box's agent instead of answering itself.
var servedByAgent = map[string]bool{
	"ExecCommand": true, "ExecCode": true, "ExecStream": true, "CodeStream": true,
	"ReadFile": true, "WriteFile": true, "ListFiles": true, "UploadFiles": true, "DownloadFile": true,
	"StatFile": true, "MakeDirectory": true, "RenameFile": true, "RemoveFile": true,
}

// TestEveryOperationIsServed checks that boxd answers every operation of
// the API: each is either implemented by the control plane or proxied to
// the box's agent, so none falls through to 501.
func TestEveryOperationIsServed(t *testing.T) {
	it := reflect.TypeFor[gen.StrictServerInterface]()
	for i := range it.NumMethod() {
		op := it.Method(i).Name
		if implemented[op] == servedByAgent[op] {
			t.Errorf("%s: implemented by the control plane %v, proxied to the agent %v; want exactly one", op, implemented[op], servedByAgent[op])
		}
	}
	if len(dataPlane) < len(servedByAgent) {
		t.Errorf("dataPlane has %d routes, servedByAgent %d operations", len(dataPlane), len(servedByAgent))
	}
}
