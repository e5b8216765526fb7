package box

import "testing"

func TestJoin(t *testing.T) {
	t.Parallel()
	cases := []struct{ dir, p, want string }{
		{"/workspace/home", "sub", "/workspace/home/sub"},
		{"/workspace/home", "./a/../b", "/workspace/home/b"},
		{"/workspace/home", "..", "/workspace"},
		{"/workspace/home", "../../../..", "/"},
		{"/workspace/home", "/tmp/", "/tmp"},
		{"/workspace/home/x", "/a//b/./c/..", "/a/b"},
		{"/", "..", "/"},
		{"/workspace/home", "~", "/workspace/home/~"},
	}
	for _, c := range cases {
		if got := join(c.dir, c.p); got != c.want {
			t.Errorf("join(%q, %q) = %q, want %q", c.dir, c.p, got, c.want)
		}
	}
}

func TestFolder(t *testing.T) {
	t.Parallel()
	cases := []struct{ dir, want string }{
		{"/workspace/home", ""},
		{"/workspace/home/project-a/src", "project-a/src"},
		{"/workspace/homework", "/workspace/homework"},
		{"/workspace", "/workspace"},
		{"/home/boxuser", "/home/boxuser"},
		{"/tmp", "/tmp"},
	}
	for _, c := range cases {
		if got := folder(c.dir); got != c.want {
			t.Errorf("folder(%q) = %q, want %q", c.dir, got, c.want)
		}
	}
}
