# Which Python modules of the runtime are the largest? Reads them all at once.
import asyncio

files = [f for f in await tools.list_dir(path="runtime") if f.endswith(".py")]
print(f"found {len(files)} modules in runtime/")
texts = await asyncio.gather(*(tools.read_file(path=f"runtime/{f}") for f in files))
counts = await asyncio.gather(*(tools.count_words(text=t) for t in texts))
ranked = sorted(zip(files, counts), key=lambda pair: -pair[1])
for name, words in ranked[:3]:
    print(f"  {name}: {words} words")
try:
    await tools.read_file(path="../../etc/passwd")
except ToolCallError as e:
    print(f"refused as expected: {e.message}")
return {"modules": len(files), "words": sum(counts), "largest": ranked[0][0]}
