blocks = []
step("allocate")
while len(blocks) * (8 << 20) < 2 * <% .Limits.MemoryBytes %>:
    blocks.append(b"\x01" * (8 << 20))
answer({"allocated_mib": min(len(blocks) * 8, 1 << 20)})
