// llvm-mca's total cycles per code region for many regions in one process (pytest_rvv/measure/mca_driver.py).
// Instruments (LLVM-MCA-RISCV-LMUL/SEW comments, and those a vsetvli/vsetivli starts) are made as llvm-mca's
// instrument region generator makes them, but each code region starts with none: every region is estimated as
// llvm-mca estimates it alone in its input (silicon.chunk_sources gives llvm-mca's inputs the same property).
// Usage: mca_regions CPU FILE ITERATIONS... (FILE "-": standard input); prints "NAME CYCLES..." per region; exits 1 on any
// parse or lowering error, an empty, nested or unordered region, or an instruction with no source location (the caller
// then hands the regions to llvm-mca, which drops and counts unparsable lines).
#include "llvm/MC/MCAsmInfo.h"
#include "llvm/MC/MCContext.h"
#include "llvm/MC/MCInstrAnalysis.h"
#include "llvm/MC/MCInstrInfo.h"
#include "llvm/MC/MCInstPrinter.h"
#include "llvm/MC/MCObjectFileInfo.h"
#include "llvm/MC/MCParser/AsmLexer.h"
#include "llvm/MC/MCParser/MCAsmParser.h"
#include "llvm/MC/MCParser/MCTargetAsmParser.h"
#include "llvm/MC/MCRegisterInfo.h"
#include "llvm/MC/MCStreamer.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/MCTargetOptions.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/MCA/Context.h"
#include "llvm/MCA/CustomBehaviour.h"
#include "llvm/MCA/InstrBuilder.h"
#include "llvm/MCA/Pipeline.h"
#include "llvm/MCA/SourceMgr.h"
#include "llvm/Support/FormattedStream.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

extern "C" void LLVMInitializeRISCVTargetInfo();
extern "C" void LLVMInitializeRISCVTargetMC();
extern "C" void LLVMInitializeRISCVAsmParser();
extern "C" void LLVMInitializeRISCVTargetMCA();

using namespace llvm;

// An instrument and where it starts (a comment, or the vsetvli that made it); kept in the order llvm-mca makes them.
struct Event {
  const char *At;
  mca::UniqueInstrument Made;
};

struct Collect final : MCStreamer {
  std::vector<MCInst> &Out;
  mca::InstrumentManager &IM;
  std::vector<Event> &Events;
  Collect(MCContext &C, std::vector<MCInst> &O, mca::InstrumentManager &M, std::vector<Event> &E)
      : MCStreamer(C), Out(O), IM(M), Events(E) {}
  void emitInstruction(const MCInst &I, const MCSubtargetInfo &) override {
    Out.push_back(I);
    for (mca::UniqueInstrument &Made : IM.createInstruments(I))
      Events.push_back({I.getLoc().getPointer(), std::move(Made)});
  }
  bool emitSymbolAttribute(MCSymbol *, MCSymbolAttr) override { return true; }
  void emitCommonSymbol(MCSymbol *, uint64_t, Align) override {}
  void emitZerofill(MCSection *, MCSymbol *, uint64_t, Align, SMLoc) override {}
};

struct Marks final : AsmCommentConsumer {
  mca::InstrumentManager &IM;
  std::vector<Event> &Events;
  std::vector<std::pair<const char *, std::string>> Begins;
  std::vector<const char *> Ends;
  bool Bad = false;
  Marks(mca::InstrumentManager &M, std::vector<Event> &E) : IM(M), Events(E) {}
  void HandleComment(SMLoc Loc, StringRef Text) override {
    StringRef C = Text.ltrim(" \t");
    if (C.consume_front("LLVM-MCA-BEGIN")) Begins.push_back({Loc.getPointer(), C.trim(" \t").str()});
    else if (C.consume_front("LLVM-MCA-END")) Ends.push_back(Loc.getPointer());
    else if (C.consume_front("LLVM-MCA-")) {  // an instrument, as llvm-mca's InstrumentRegionCommentConsumer reads it
      auto [Kind, Data] = C.split(" ");
      mca::UniqueInstrument Made = IM.supportsInstrumentType(Kind) ? IM.createInstrument(Kind, Data) : nullptr;
      if (!Made) { fprintf(stderr, "bad instrument comment: %s\n", Text.str().c_str()); Bad = true; return; }
      Events.push_back({Loc.getPointer(), std::move(Made)});
    }
  }
};

// The instruments llvm-mca gives each instruction of [First, Last) of a region: every instrument made in that region
// (Mine, in the order made) whose span holds it; a span runs from its start to the start of the next of its kind, both
// ends included, as in llvm-mca's InstrumentRegions.
static std::vector<SmallVector<mca::Instrument *>> active(const std::vector<MCInst> &Insts, size_t First, size_t Last,
                                                          const std::vector<const Event *> &Mine) {
  std::vector<const char *> Until(Mine.size(), nullptr);
  for (size_t e = 0; e < Mine.size(); e++)
    for (size_t f = e + 1; f < Mine.size() && !Until[e]; f++)
      if (Mine[f]->Made->getDesc() == Mine[e]->Made->getDesc()) Until[e] = Mine[f]->At;
  std::vector<SmallVector<mca::Instrument *>> Found(Last - First);
  for (size_t i = First; i < Last; i++) {
    const char *At = Insts[i].getLoc().getPointer();
    for (size_t e = 0; e < Mine.size(); e++)
      if (Mine[e]->At <= At && (!Until[e] || At <= Until[e])) Found[i - First].push_back(Mine[e]->Made.get());
  }
  return Found;
}

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: mca_regions CPU FILE ITERATIONS...\n"); return 2; }
  LLVMInitializeRISCVTargetInfo(); LLVMInitializeRISCVTargetMC(); LLVMInitializeRISCVAsmParser();
  LLVMInitializeRISCVTargetMCA();
  Triple TT("riscv64");
  std::string Err;
  const Target *T = TargetRegistry::lookupTarget(TT, Err);
  if (!T) { fprintf(stderr, "%s\n", Err.c_str()); return 1; }
  std::unique_ptr<MCSubtargetInfo> STI(T->createMCSubtargetInfo(TT, argv[1], ""));
  if (!STI || !STI->isCPUStringValid(argv[1]) || !STI->getSchedModel().hasInstrSchedModel()) return 1;
  std::unique_ptr<MCRegisterInfo> MRI(T->createMCRegInfo(TT));
  MCTargetOptions MCOptions;
  std::unique_ptr<MCAsmInfo> MAI(T->createMCAsmInfo(*MRI, TT, MCOptions));
  std::unique_ptr<MCInstrInfo> MCII(T->createMCInstrInfo());
  std::unique_ptr<MCInstrAnalysis> MCIA(T->createMCInstrAnalysis(MCII.get()));
  auto Buf = MemoryBuffer::getFileOrSTDIN(argv[2]);
  if (!Buf) { fprintf(stderr, "cannot read %s\n", argv[2]); return 1; }
  SourceMgr SrcMgr;
  SrcMgr.AddNewSourceBuffer(std::move(*Buf), SMLoc());
  MCContext Ctx(TT, MAI.get(), MRI.get(), STI.get(), &SrcMgr);
  std::unique_ptr<MCObjectFileInfo> MOFI(T->createMCObjectFileInfo(Ctx, false));
  Ctx.setObjectFileInfo(MOFI.get());
  std::unique_ptr<mca::InstrumentManager> IM(T->createInstrumentManager(*STI, *MCII));
  if (!IM) IM = std::make_unique<mca::InstrumentManager>(*STI, *MCII);
  std::vector<MCInst> Insts;
  std::vector<Event> Events;
  Collect Str(Ctx, Insts, *IM, Events);
  std::unique_ptr<MCInstPrinter> IP(T->createMCInstPrinter(TT, 0, *MAI, *MCII, *MRI));
  formatted_raw_ostream FOS(nulls());
  T->createAsmTargetStreamer(Str, FOS, IP.get());
  std::unique_ptr<MCAsmParser> Parser(createMCAsmParser(SrcMgr, Ctx, Str, *MAI));
  Marks M(*IM, Events);
  Parser->getLexer().setCommentConsumer(&M);
  Parser->getLexer().setLexMasmIntegers(true);
  MCTargetOptions Opts;
  Opts.PreserveAsmComments = false;
  std::unique_ptr<MCTargetAsmParser> TAP(T->createMCAsmParser(*STI, *Parser, *MCII, Opts));
  Parser->setTargetParser(*TAP);
  if (Parser->Run(false)) { fprintf(stderr, "parse failed\n"); return 1; }
  if (M.Bad || M.Begins.size() != M.Ends.size()) { fprintf(stderr, "bad comments or unbalanced regions\n"); return 1; }
  for (size_t r = 0; r < M.Begins.size(); r++)  // regions one after another, as silicon.py writes them
    if (M.Ends[r] < M.Begins[r].first || (r + 1 < M.Begins.size() && M.Begins[r + 1].first < M.Ends[r])) {
      fprintf(stderr, "nested or unordered regions\n"); return 1;
    }
  for (const MCInst &I : Insts)  // an expansion with no place in the text: llvm-mca puts it in no region
    if (!I.getLoc().isValid()) { fprintf(stderr, "an instruction with no source location\n"); return 1; }
  std::unique_ptr<mca::InstrPostProcess> IPP(T->createInstrPostProcess(*STI, *MCII));
  if (!IPP) IPP = std::make_unique<mca::InstrPostProcess>(*STI, *MCII);
  mca::InstrBuilder IB(*STI, *MCII, *MRI, MCIA.get(), *IM, 100);
  mca::Context MCA(*MRI, *STI);
  mca::PipelineOptions PO(0, 0, 0, 0, 0, 0, true, false);
  std::vector<std::vector<const Event *>> Within(M.Begins.size());  // each region's instruments, in the order made
  for (const Event &E : Events) {
    auto After = std::upper_bound(M.Begins.begin(), M.Begins.end(), E.At,
                                  [](const char *At, const auto &B) { return At < B.first; });
    size_t r = After - M.Begins.begin();
    if (r > 0 && E.At < M.Ends[r - 1]) Within[r - 1].push_back(&E);
  }
  size_t next = 0;
  for (size_t r = 0; r < M.Begins.size(); r++) {
    const char *lo = M.Begins[r].first, *hi = M.Ends[r];
    while (next < Insts.size() && Insts[next].getLoc().getPointer() < lo) next++;
    size_t first = next;
    while (next < Insts.size() && Insts[next].getLoc().getPointer() < hi) next++;
    if (first == next) { fprintf(stderr, "empty region %s\n", M.Begins[r].second.c_str()); return 1; }  // llvm-mca skips it
    auto Given = active(Insts, first, next, Within[r]);
    printf("%s", M.Begins[r].second.c_str());
    for (int a = 3; a < argc; a++) {
      IB.clear();
      IPP->resetState();
      SmallVector<std::unique_ptr<mca::Instruction>> Seq;
      for (size_t i = first; i < next; i++) {
        auto I = IB.createInstruction(Insts[i], Given[i - first]);
        if (!I) { consumeError(I.takeError()); fprintf(stderr, "lowering failed in %s\n", M.Begins[r].second.c_str()); return 1; }
        IPP->postProcessInstruction(*I.get(), Insts[i]);
        Seq.emplace_back(std::move(I.get()));
      }
      mca::CircularSourceMgr S(Seq, (unsigned)atoi(argv[a]));
      std::unique_ptr<mca::CustomBehaviour> CB(T->createCustomBehaviour(*STI, S, *MCII));
      if (!CB) CB = std::make_unique<mca::CustomBehaviour>(*STI, S, *MCII);
      auto P = MCA.createDefaultPipeline(PO, S, *CB);
      Expected<unsigned> C = P->run();
      if (!C) { consumeError(C.takeError()); fprintf(stderr, "pipeline failed\n"); return 1; }
      printf(" %u", *C);
    }
    printf("\n");
  }
  return 0;
}
