package proto

// CheckResultPaths exposes both paths of CheckResult to the tests: the
// streaming fast path (ok=false when it declines) and the tree path.
func (s *Schema) CheckResultPaths(out []byte) (stream []byte, streamOK bool, tree []byte, treeErr error) {
	stream, streamOK = s.checkStream(out)
	tree, treeErr = s.checkTree(out)
	return stream, streamOK, tree, treeErr
}
