package local

import (
	"reflect"
	"testing"
)

// servedByAgent lists the operations of the dataPlane routes, which boxd
// proxies to the box's agent instead of answering itself.
var servedByAgent = map[string]bool{
	"ExecCommand": true, "ExecCode": true, "ExecStream": true, "CodeStream": true,
	"ReadFile": true, "WriteFile": true, "ListFiles": true, "UploadFiles": true, "DownloadFile": true,
	"StatFile": true, "MakeDirectory": true, "RenameFile": true, "RemoveFile": true,
}

// TestEveryOperationIsServed checks that the operations the control plane
// leaves to the box's agent are exactly the data plane's: every other
// operation of the API has a method of its own (the compiler checks that
// controlPlane has them all), so none is left unanswered.
func TestEveryOperationIsServed(t *testing.T) {
	stood := map[string]bool{}
	at := reflect.TypeFor[agentOperations]()
	for i := range at.NumMethod() {
		stood[at.Method(i).Name] = true
	}
	if !reflect.DeepEqual(stood, servedByAgent) {
		t.Errorf("agentOperations stands for %v; the agent serves %v", stood, servedByAgent)
	}
	if len(dataPlane) < len(servedByAgent) {
		t.Errorf("dataPlane has %d routes, servedByAgent %d operations", len(dataPlane), len(servedByAgent))
	}
}
